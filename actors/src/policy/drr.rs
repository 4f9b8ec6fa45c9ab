//! (to be written) policy: drr
