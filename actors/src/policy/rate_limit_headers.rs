//! (to be written) policy: rate_limit_headers
