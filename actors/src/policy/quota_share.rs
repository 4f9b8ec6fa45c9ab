//! (to be written) policy: quota_share
