//! (to be written) policy: cooldown
