//! ANSI colour for the text views, or none: the only place escape codes are written.

/// What a piece of text means, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    Warn,
    Info,
    Dim,
}

/// Colours text when enabled; passes it through otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paint {
    enabled: bool,
}

impl Paint {
    pub fn new(enabled: bool) -> Self {
        Paint { enabled }
    }

    pub fn paint(&self, tone: Tone, text: &str) -> String {
        if !self.enabled {
            return text.to_string();
        }
        let code = match tone {
            Tone::Good => "32",
            Tone::Bad => "1;31",
            Tone::Warn => "33",
            Tone::Info => "36",
            Tone::Dim => "2",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}
