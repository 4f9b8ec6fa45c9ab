//! (to be written) policy: reset_hint
