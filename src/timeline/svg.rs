//! `--svg FILE`: the incident as a picture — one lane per connection grouped by provider, bands
//! for cooldowns, disables, per-model lockouts (labelled with the model) and breaker-open
//! periods (across the provider's lanes), red ticks for failures, grey ticks for successes
//! (binned), a UTC time axis and a legend. Hand-written SVG; owns layout only (bands come
//! from `periods`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quotaroute_journal::{Envelope, Event};

use crate::time_parse::{format_clock, format_duration, format_utc_ms};
use crate::timeline::filter::Filter;
use crate::timeline::periods::{Band, PeriodTracker, Periods};

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 190.0;
const RIGHT: f64 = 48.0;
const TOP: f64 = 78.0;
const PROVIDER_ROW: f64 = 24.0;
const LANE_BASE: f64 = 34.0;
const LOCK_ROW: f64 = 14.0;
const AXIS: f64 = 44.0;
/// Width of one success bin, in pixels.
const BIN_PX: f64 = 3.0;

const COOLDOWN: &str = "#f59e0b";
const DISABLED: &str = "#4b5563";
const LOCK: &str = "#8b5cf6";
const BREAKER: &str = "#dc2626";
const FAILURE: &str = "#dc2626";
const SUCCESS: &str = "#9ca3af";

/// Collects what the picture needs from the stream.
#[derive(Debug, Default)]
pub struct SvgBuilder {
    filter: Filter,
    tracker: PeriodTracker,
    /// Provider → its connections, in config order then first-seen order.
    lanes: Vec<(String, Vec<String>)>,
    failures: BTreeMap<String, Vec<u64>>,
    successes: BTreeMap<String, Vec<u64>>,
    span: Option<(u64, u64)>,
    /// A span fixed by the caller (the dashboard's "last hour"), instead of the events' own.
    fixed_span: Option<(u64, u64)>,
}

impl SvgBuilder {
    /// Lanes are limited by the filter's provider/connection; time by its window.
    pub fn new(filter: Filter) -> Self {
        SvgBuilder {
            filter,
            ..SvgBuilder::default()
        }
    }

    /// Draws exactly `[start_ms, end_ms]`, however few events fall in it (a live view of the
    /// last hour, where a quiet hour is still an hour wide).
    pub fn over(mut self, start_ms: u64, end_ms: u64) -> Self {
        self.fixed_span = Some((start_ms, end_ms));
        self
    }

    fn add_lane(&mut self, provider: &str, connection: &str) {
        if self
            .filter
            .provider
            .as_deref()
            .is_some_and(|p| p != provider)
            || self
                .filter
                .connection
                .as_deref()
                .is_some_and(|c| c != connection)
        {
            return;
        }
        let index = match self.lanes.iter().position(|(p, _)| p == provider) {
            Some(index) => index,
            None => {
                self.lanes.push((provider.to_string(), Vec::new()));
                self.lanes.len() - 1
            }
        };
        let connections = &mut self.lanes[index].1;
        if !connections.iter().any(|c| c == connection) {
            connections.push(connection.to_string());
        }
    }

    pub fn observe(&mut self, envelope: &Envelope) {
        let at = envelope.at_ms;
        self.tracker.observe(at, &envelope.event);
        if let Event::ConfigLoaded(config) = &envelope.event {
            for c in &config.connections {
                self.add_lane(&c.provider, &c.id);
            }
        }
        if !self.filter.in_window(at) {
            return;
        }
        self.span = Some(match self.span {
            None => (at, at),
            Some((start, end)) => (start.min(at), end.max(at)),
        });
        match &envelope.event {
            Event::RequestFailed(e) => {
                self.add_lane(&e.provider, &e.connection);
                self.failures
                    .entry(e.connection.to_string())
                    .or_default()
                    .push(at);
            }
            Event::RequestSucceeded(e) => {
                self.add_lane(&e.provider, &e.connection);
                self.successes
                    .entry(e.connection.to_string())
                    .or_default()
                    .push(at);
            }
            _ => {}
        }
    }

    /// The SVG document.
    pub fn finish(mut self) -> String {
        let (start, mut end) = self.fixed_span.or(self.span).unwrap_or((0, 1));
        if end <= start {
            end = start + 1_000;
        }
        let periods = std::mem::take(&mut self.tracker).finish(start, end);
        let plot = Plot { start, end };
        let mut body = String::new();
        let mut y = TOP;
        for (provider, connections) in &self.lanes {
            let group_top = y;
            // Provider header: name and its breaker strip.
            let _ = write!(
                body,
                r#"<text x="12" y="{:.1}" class="provider">{}</text>"#,
                y + 16.0,
                escape(provider)
            );
            let _ = write!(
                body,
                r##"<rect x="{LEFT}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#f3f4f6"/>"##,
                y + 4.0,
                plot.width(),
                PROVIDER_ROW - 8.0
            );
            let open = periods
                .breaker_open
                .get(provider)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for band in open {
                let (x, w) = plot.span_x(band);
                let _ = write!(
                    body,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{BREAKER}"><title>{} breaker OPEN {} ({})</title></rect>"#,
                    y + 4.0,
                    PROVIDER_ROW - 8.0,
                    escape(provider),
                    format_utc_ms(band.start_ms),
                    format_duration(band.duration_ms())
                );
                if w > 70.0 {
                    let _ = write!(
                        body,
                        r#"<text x="{:.1}" y="{:.1}" class="inband">breaker OPEN</text>"#,
                        x + 4.0,
                        y + 15.5
                    );
                }
            }
            y += PROVIDER_ROW;
            for connection in connections {
                y = self.lane(&mut body, &plot, &periods, connection, y);
            }
            // Breaker-open periods shade every lane of the provider.
            for band in open {
                let (x, w) = plot.span_x(band);
                let _ = write!(
                    body,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{BREAKER}" fill-opacity="0.10" stroke="{BREAKER}" stroke-opacity="0.5" stroke-dasharray="3 3"/>"#,
                    group_top + PROVIDER_ROW,
                    y - group_top - PROVIDER_ROW
                );
            }
            y += 8.0;
        }
        let plot_bottom = y;
        let axis = plot.axis(TOP, plot_bottom);
        let height = plot_bottom + AXIS;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
        );
        svg.push_str(
            "<style>text{font-size:12px;fill:#111827}.provider{font-size:13px;font-weight:bold}\
             .conn{font-size:12px}.axis{font-size:11px;fill:#374151}.lock{font-size:10px;fill:#ffffff}\
             .inband{font-size:11px;fill:#ffffff;font-weight:bold}.title{font-size:15px;font-weight:bold}\
             .legend{font-size:11px}</style>",
        );
        let _ = write!(
            svg,
            r##"<rect width="{WIDTH}" height="{height:.0}" fill="#ffffff"/><text x="12" y="22" class="title">quotaroute incident: {} to {} ({})</text>"##,
            format_utc_ms(start),
            format_utc_ms(end),
            format_duration(end - start)
        );
        svg.push_str(&legend(44.0));
        svg.push_str(&axis);
        svg.push_str(&body);
        svg.push_str("</svg>\n");
        svg
    }

    /// One connection lane; returns the y below it.
    fn lane(&self, body: &mut String, plot: &Plot, periods: &Periods, id: &str, y: f64) -> f64 {
        let locks = periods.locked.get(id);
        let lock_rows = locks.map_or(0, |models| {
            models.values().filter(|b| !b.is_empty()).count()
        });
        let height = LANE_BASE + LOCK_ROW * lock_rows as f64;
        let _ = write!(
            body,
            r##"<g class="lane" data-connection="{}"><rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="#fafafa" stroke="#e5e7eb"/>"##,
            escape(id),
            plot.width(),
            height - 2.0
        );
        let _ = write!(
            body,
            r#"<text x="24" y="{:.1}" class="conn">{}</text>"#,
            y + 20.0,
            escape(id)
        );
        let bands = |map: &BTreeMap<String, Vec<Band>>| map.get(id).cloned().unwrap_or_default();
        for band in bands(&periods.disabled) {
            let (x, w) = plot.span_x(&band);
            let _ = write!(
                body,
                r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{DISABLED}" fill-opacity="0.7"><title>{} disabled ({}) {}</title></rect>"#,
                y + 2.0,
                LANE_BASE - 6.0,
                escape(id),
                escape(&band.label),
                format_duration(band.duration_ms())
            );
        }
        for band in bands(&periods.cooling) {
            let (x, w) = plot.span_x(&band);
            let _ = write!(
                body,
                r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{COOLDOWN}" fill-opacity="0.6"><title>{} cooling after {} for {}</title></rect>"#,
                y + 2.0,
                LANE_BASE - 6.0,
                escape(id),
                escape(&band.label),
                format_duration(band.duration_ms())
            );
        }
        // Successes: grey ticks whose height grows with how many fell in the bin.
        if let Some(times) = self.successes.get(id) {
            let mut bins: BTreeMap<i64, u32> = BTreeMap::new();
            for &at in times {
                *bins.entry((plot.x(at) / BIN_PX) as i64).or_default() += 1;
            }
            let most = bins.values().copied().max().unwrap_or(1).max(1);
            let mut path = String::new();
            for (bin, count) in bins {
                let x = bin as f64 * BIN_PX + 1.0;
                let h = 4.0 + 10.0 * f64::from(count) / f64::from(most);
                let _ = write!(path, "M{x:.1} {:.1}v{:.1}", y + LANE_BASE - 5.0, -h);
            }
            let _ = write!(
                body,
                r#"<path d="{path}" stroke="{SUCCESS}" stroke-width="1" class="successes"/>"#
            );
        }
        if let Some(times) = self.failures.get(id) {
            let mut path = String::new();
            for &at in times {
                let _ = write!(path, "M{:.1} {:.1}v12", plot.x(at), y + 4.0);
            }
            let _ = write!(
                body,
                r#"<path d="{path}" stroke="{FAILURE}" stroke-width="1.4" class="failures"/>"#
            );
        }
        let mut row_y = y + LANE_BASE - 2.0;
        for (model, model_bands) in locks.into_iter().flatten() {
            if model_bands.is_empty() {
                continue;
            }
            let _ = write!(
                body,
                r#"<text x="40" y="{:.1}" class="axis">lock {}</text>"#,
                row_y + 10.0,
                escape(model)
            );
            for band in model_bands {
                let (x, w) = plot.span_x(band);
                let _ = write!(
                    body,
                    r#"<rect x="{x:.1}" y="{row_y:.1}" width="{w:.1}" height="{:.1}" fill="{LOCK}" rx="2"><title>{}/{} locked ({}) {}</title></rect>"#,
                    LOCK_ROW - 3.0,
                    escape(id),
                    escape(model),
                    escape(&band.label),
                    format_duration(band.duration_ms())
                );
                if w > 8.0 * model.len() as f64 {
                    let _ = write!(
                        body,
                        r#"<text x="{:.1}" y="{:.1}" class="lock">{}</text>"#,
                        x + 3.0,
                        row_y + 9.0,
                        escape(model)
                    );
                }
            }
            row_y += LOCK_ROW;
        }
        body.push_str("</g>");
        y + height
    }
}

/// Maps time to x.
struct Plot {
    start: u64,
    end: u64,
}

impl Plot {
    fn width(&self) -> f64 {
        WIDTH - LEFT - RIGHT
    }

    fn x(&self, at_ms: u64) -> f64 {
        let clamped = at_ms.clamp(self.start, self.end);
        LEFT + self.width() * (clamped - self.start) as f64 / (self.end - self.start) as f64
    }

    /// x and width of a band, at least one pixel wide so short bands stay visible.
    fn span_x(&self, band: &Band) -> (f64, f64) {
        let x = self.x(band.start_ms);
        (x, (self.x(band.end_ms) - x).max(1.0))
    }

    /// Grid lines and `HH:MM:SS` labels at a round step giving about ten labels.
    fn axis(&self, top: f64, bottom: f64) -> String {
        const STEPS: [u64; 14] = [
            1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
            900_000, 1_800_000, 3_600_000, 7_200_000,
        ];
        let span = self.end - self.start;
        let step = STEPS
            .iter()
            .copied()
            .find(|step| span / step <= 12)
            .unwrap_or(span / 10 + 1);
        let mut out = String::new();
        let first = self.start.div_ceil(step) * step;
        let mut t = first;
        while t <= self.end {
            let x = self.x(t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e5e7eb"/><text x="{x:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"##,
                bottom + 4.0,
                bottom + 18.0,
                format_clock(t)
            );
            t += step;
        }
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#6b7280"/><text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">UTC</text>"##,
            WIDTH - RIGHT,
            WIDTH - RIGHT,
            bottom + 34.0
        );
        out
    }
}

fn legend(y: f64) -> String {
    let items: [(&str, &str, &str); 6] = [
        ("rect", BREAKER, "breaker open (provider)"),
        ("rect", COOLDOWN, "connection cooldown"),
        ("rect", LOCK, "model lockout"),
        ("rect", DISABLED, "connection disabled"),
        ("tick", FAILURE, "failure"),
        ("tick", SUCCESS, "successes (binned)"),
    ];
    let mut out = String::new();
    let mut x = 12.0;
    for (shape, colour, label) in items {
        if shape == "rect" {
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="18" height="10" fill="{colour}"/>"#,
                y - 9.0
            );
        } else {
            let _ = write!(
                out,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"/>"#,
                x + 9.0,
                y - 11.0,
                x + 9.0,
                y + 2.0
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{y:.1}" class="legend">{label}</text>"#,
            x + 24.0
        );
        x += 34.0 + 6.5 * label.len() as f64;
    }
    out
}

/// XML-escapes text content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
    }

    #[test]
    fn a_fixed_span_is_drawn_whole_however_few_events_fall_in_it() {
        let hour = 3_600_000;
        let svg = SvgBuilder::new(Filter::default())
            .over(1_700_000_000_000, 1_700_000_000_000 + hour)
            .finish();
        assert!(
            svg.contains(&format!("({})", format_duration(hour))),
            "{svg}"
        );
    }

    #[test]
    fn item5_an_empty_stream_is_still_a_document() {
        let svg = SvgBuilder::new(Filter::default()).finish();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
