//! What the commands print, on stdout and stderr, written so that a closed pipe
//! (`quotaroute check … | head -1`) ends the output quietly instead of panicking as
//! `println!` does on EPIPE. Owns writing only, never formatting.

use std::io::Write;

/// Writes `text` to stdout; a closed or failing stdout is ignored.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes `text` and a newline to stdout (see [`out`]).
pub fn out_line(text: &str) {
    out(&format!("{text}\n"));
}

/// Writes `text` and a newline to stderr; a closed or failing stderr is ignored.
pub fn err_line(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}
