//! The operator's dashboard, its own wing on top of the node's admin API: the page (`GET /ui`,
//! [`page`]), its live feed (`/admin/events`, [`events`]) and its incident picture
//! (`/admin/timeline.svg`, [`timeline`]), drawn by the same `crate::timeline` the debugger uses.

pub mod events;
pub mod page;
pub mod timeline;
