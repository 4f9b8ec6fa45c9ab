//! (to be written) policy: buckets
