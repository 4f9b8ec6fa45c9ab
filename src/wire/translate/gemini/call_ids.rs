//! The ids Gemini does not give its function calls (behaviour §15: the router makes stable ids
//! and matches results by name and order). A call in a Gemini client's history gets an id from
//! its turn and its place in it, the same however often the conversation is sent again; a call
//! in a Gemini answer gets one from the answer's `responseId` and its place, unique across a
//! conversation. A `functionResponse` takes the id of the earliest call of its name that no
//! result has answered yet. An `id` Gemini (or a client) did give is kept.

/// The id of the `index`-th call in the `turn`-th content of a Gemini client's request.
pub fn history_call(turn: usize, index: usize) -> String {
    format!("call_gemini_{turn}_{index}")
}

/// The id of the `index`-th call of the Gemini answer `response_id`; an answer without one
/// (Google always gives one; a proxy in between may not) is told apart by `created`, the Unix
/// time the client's answer says.
pub fn answer_call(response_id: &str, created: u64, index: usize) -> String {
    let safe: String = response_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(64)
        .collect();
    if safe.is_empty() {
        format!("call_gemini{created}_{index}")
    } else {
        format!("call_{safe}_{index}")
    }
}

/// The calls of a model turn that wait for their results, in order.
#[derive(Debug, Default)]
pub struct Pending {
    calls: Vec<(String, String)>,
}

impl Pending {
    /// A new model turn: the calls it made replace any the last one left unanswered.
    pub fn new_turn(&mut self) {
        self.calls.clear();
    }

    /// A call `name` made, with its id.
    pub fn call(&mut self, name: &str, id: &str) {
        self.calls.push((name.to_string(), id.to_string()));
    }

    /// The id a result for `name` answers: the earliest waiting call of that name (taken), else
    /// `fallback` (a result whose call the client did not send).
    pub fn answer(&mut self, name: &str, fallback: String) -> String {
        match self.calls.iter().position(|(called, _)| called == name) {
            Some(at) => self.calls.remove(at).1,
            None => fallback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_take_the_earliest_waiting_call_of_their_name() {
        let mut pending = Pending::default();
        pending.call("read", "a");
        pending.call("grep", "b");
        pending.call("read", "c");
        assert_eq!(pending.answer("read", "x".into()), "a");
        assert_eq!(pending.answer("read", "x".into()), "c");
        assert_eq!(pending.answer("read", "x".into()), "x");
        assert_eq!(pending.answer("grep", "x".into()), "b");
        pending.call("read", "d");
        pending.new_turn();
        assert_eq!(pending.answer("read", "y".into()), "y");
    }

    #[test]
    fn ids_are_stable_and_safe_for_every_api() {
        assert_eq!(history_call(3, 1), history_call(3, 1));
        assert_ne!(history_call(3, 1), history_call(1, 3));
        assert_eq!(answer_call("lQk5aL6W/x.y", 7, 0), "call_lQk5aL6Wxy_0");
        assert_eq!(answer_call("", 1_700_000_000, 2), "call_gemini1700000000_2");
    }
}
