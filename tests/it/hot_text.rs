//! The linker script that places the node's hot code together (`src/hot-text.ld`): a shape the
//! linkers take, and a list that covers the request path rather than start-up alone.

use std::path::Path;

fn script() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/hot-text.ld"))
        .expect("src/hot-text.ld is in the repository")
}

/// Every rule names a function's section in both the plain and the `.unlikely.` form, with
/// nothing a linker script would read as syntax inside a name, and the script only adds
/// `.text.hot` before the default `.text` (INSERT), so the linker keeps its own layout.
#[test]
fn hot_text_is_an_insert_script_of_section_rules() {
    let script = script();
    let rules: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("*("))
        .collect();
    assert!(rules.len() > 500, "only {} rules", rules.len());
    for rule in &rules {
        let inner = rule
            .strip_prefix("*(")
            .and_then(|r| r.strip_suffix(')'))
            .expect(rule);
        let patterns: Vec<&str> = inner.split(' ').collect();
        assert_eq!(patterns.len(), 2, "{rule}");
        let name = patterns[0].strip_prefix(".text.").expect(rule);
        assert_eq!(patterns[1], format!(".text.unlikely.{name}"), "{rule}");
        assert!(name.ends_with('*'), "{rule}");
        assert!(
            !name.contains(['(', ')', '{', '}', ';', '"', ',', '=']),
            "a name with linker-script syntax: {rule}"
        );
    }
    assert!(script.contains(".text.hot : {"));
    assert!(script.trim_end().ends_with("INSERT BEFORE .text;"));
}

/// Written from a run that served requests: the handler, the combo's decision and the journal
/// writer are in it, each both by exact name and without its hash.
#[test]
fn hot_text_covers_the_request_path() {
    let script = script();
    for function in [
        "10quotaroute4node6routed5tries11serve_tries",
        "10quotaroute4node7attempt10try_target",
        "17quotaroute_actors5actor5combo10ComboState5route",
        "18quotaroute_journal6writer6Writer6commit",
        "5hyper5proto2h1",
    ] {
        let rules: Vec<&str> = script
            .lines()
            .filter(|line| line.contains(function))
            .collect();
        assert!(
            rules.iter().any(|rule| rule.contains("17h*")),
            "{function}: no hash-free rule"
        );
        assert!(
            rules.iter().any(|rule| !rule.contains("17h*")),
            "{function}: no exact rule"
        );
    }
}
