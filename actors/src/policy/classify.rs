//! (to be written) policy: classify
