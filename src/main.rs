//! The `quotaroute` binary.

fn main() -> anyhow::Result<()> {
    eprintln!("quotaroute: the node is not built yet; see README.md");
    std::process::exit(2)
}
