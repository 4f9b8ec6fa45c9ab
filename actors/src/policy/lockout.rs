//! (to be written) policy: lockout
