//! (to be written) policy: breaker
