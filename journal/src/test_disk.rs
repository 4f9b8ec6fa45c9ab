//! A small tmpfs for the disk-trouble tests: a real filesystem that can fill up and then grow
//! (`mount -o remount,size=…`). Mounting needs root, as CI has; elsewhere [`Tmpfs::mount`]
//! answers `None` and the tests say they did nothing. Test support only: nothing in the
//! journal uses it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A tmpfs mounted on a directory; unmounted when dropped.
#[derive(Debug)]
pub struct Tmpfs {
    mount: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `"3m"`) on `at`, creating the directory.
    pub fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then(|| Tmpfs {
            mount: at.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Gives it a new size; whether that worked.
    pub fn resize(&self, size: &str) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.mount)
            .status()
            .is_ok_and(|status| status.success())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}
