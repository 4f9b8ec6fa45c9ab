//! A journal as a picture, shared by the debugger (`replay --svg`) and the dashboard: which
//! events to look at ([`filter`]), the periods they make — cooling, locked, disabled, open
//! ([`periods`]) — and the SVG timeline drawn from them ([`svg`]).

pub mod filter;
pub mod periods;
pub mod svg;
