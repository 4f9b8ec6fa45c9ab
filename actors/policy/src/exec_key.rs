//! The execution key of a target, `connection/model`: what DRR deficits, affinity bindings and
//! leads, a peer's bindings and the replay tool's pictures name a target by. Written here only;
//! every other file builds it through [`exec_key`] and reads it through [`split_exec_key`].
//! (Journal and snapshot text: unchanged.)

/// The execution key `connection/model`.
pub fn exec_key(connection: &str, model: &str) -> String {
    let mut key = String::with_capacity(connection.len() + 1 + model.len());
    key.push_str(connection);
    key.push('/');
    key.push_str(model);
    key
}

/// The connection and model of an execution key (`None` for a string without a `/`).
pub fn split_exec_key(key: &str) -> Option<(&str, &str)> {
    key.split_once('/')
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_key_is_connection_slash_model() {
        assert_eq!(super::exec_key("k1", "gpt-4o"), "k1/gpt-4o");
        assert_eq!(
            super::split_exec_key("k1/org/model"),
            Some(("k1", "org/model"))
        );
    }
}
