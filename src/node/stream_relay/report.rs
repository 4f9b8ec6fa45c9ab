//! The end of a relayed stream: what it is charged (the upstream's usage checked, or an
//! estimate), its client's usage and its attempt's report, once — read on for its usage in the
//! background when the client left first (`stream_drain`).

use quotaroute_actors::{AttemptResult, Decision};
use quotaroute_journal::OutcomeClass;

use crate::node::client_gate::ChargeRecord;
use crate::node::stream_drain;
use crate::node::usage_charge;
use crate::upstream::body::UpstreamBody;
use crate::wire::usage::TokenCounts;

use super::charge::so_far;
use super::open::CommittedStream;
use super::relay::Relay;

impl Relay {
    /// The attempt's final result, once: usage counted, the break (if any) as its class.
    fn final_report(&mut self) -> Option<(Decision, AttemptResult)> {
        let mut decision = self.decision.take()?;
        let mut result = decision.take_stream_result()?;
        let mut charged = self.charged_now();
        if let Some((precharged, _)) = self.precharged {
            // A left stream's client was charged the estimate when it left: it pays the larger
            // of that and what the upstream reported after, and so does the connection.
            let counts = &mut charged.counts;
            charged.estimated |= precharged.tokens_in > counts.tokens_in
                || precharged.tokens_out > counts.tokens_out;
            counts.tokens_in = counts.tokens_in.max(precharged.tokens_in);
            counts.tokens_out = counts.tokens_out.max(precharged.tokens_out);
        }
        result.tokens_in = charged.counts.tokens_in;
        result.tokens_cached = charged.counts.tokens_cached;
        result.tokens_cache_write = charged.counts.tokens_cache_write;
        result.tokens_out = charged.counts.tokens_out;
        result.usage_estimated = charged.estimated;
        // telemetry: how the stream ended, for the attempt's span.
        let broke = self.failure.as_ref().map(|(class, _)| *class);
        self.stream.trace.stream_ended(broke, &self.stream.usage);
        match self.failure.take() {
            Some((class, message)) => {
                result.class = class;
                result.message = Some(message);
                result.after_first_content = true;
            }
            None => result.class = OutcomeClass::Success,
        }
        if let Some(counters) = &self.input_tokens {
            counters.record(
                result.tokens_in,
                result.tokens_cached,
                result.tokens_cache_write,
            );
        }
        if let (OutcomeClass::Success, Some(combo)) = (result.class, &self.charge.combo_affinity) {
            combo.served(result.tokens_in, result.tokens_cached);
        }
        // The client's usage, then its ticket (it counted in flight until now).
        if let Some(client_usage) = self.client_usage.take() {
            match self.precharged.take() {
                // The whole charge at once: a success's own event carries it.
                None => {
                    let record = if result.class == OutcomeClass::Success {
                        ChargeRecord::InRequestEvent
                    } else {
                        ChargeRecord::Separate
                    };
                    client_usage.record(&mut result, record);
                }
                Some((precharged, precharged_cost)) => {
                    // Only what goes beyond the estimate already charged.
                    let mut beyond = AttemptResult {
                        tokens_cached: result.tokens_cached.min(
                            result
                                .tokens_in
                                .saturating_sub(precharged.tokens_in)
                                .saturating_sub(result.tokens_cache_write),
                        ),
                        tokens_cache_write: 0,
                        usage_estimated: result.usage_estimated,
                        ..AttemptResult::success(
                            200,
                            result.tokens_in.saturating_sub(precharged.tokens_in),
                            result.tokens_out.saturating_sub(precharged.tokens_out),
                        )
                    };
                    client_usage.record(&mut beyond, ChargeRecord::Separate);
                    result.cost_usd = match (precharged_cost, beyond.cost_usd) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    };
                }
            }
        }
        Some((decision, result))
    }

    /// What the stream is charged on what it read so far: the upstream's usage checked, or
    /// an estimate while its closing usage has not come.
    fn charged_now(&self) -> usage_charge::Charged {
        let usage = &self.stream.usage;
        usage_charge::charged(
            TokenCounts {
                tokens_in: usage.tokens_in,
                tokens_out: usage.tokens_out,
                tokens_cached: usage.tokens_cached,
                tokens_cache_write: usage.tokens_cache_write,
                flaws: usage.flaws,
            },
            usage.final_seen,
            self.charge.request_bytes,
            usage.content_bytes,
            self.charge.usage_max_tokens,
            &self.charge.connection,
        )
    }

    /// The client left before the usage came: its client is charged the estimate now, so that
    /// its very next request already sees the spend (its budget is not a race against the
    /// drain); the drain's report charges only what goes beyond it.
    fn precharge(&mut self) {
        let Some(client_usage) = &self.client_usage else {
            return;
        };
        let estimate = self.charged_now();
        let counts = estimate.counts;
        let mut result = AttemptResult {
            tokens_cached: counts.tokens_cached,
            tokens_cache_write: counts.tokens_cache_write,
            stream: true,
            usage_estimated: estimate.estimated,
            ..AttemptResult::success(200, counts.tokens_in, counts.tokens_out)
        };
        client_usage.record(&mut result, ChargeRecord::Separate);
        self.precharged = Some((counts, result.cost_usd));
    }

    /// Reports the ended stream; a break is applied before the client sees the stream end.
    pub(super) async fn report_applied(&mut self) {
        if let Some((mut decision, result)) = self.final_report() {
            decision.report_applied(result).await;
        }
    }

    fn report(&mut self) {
        if let Some((mut decision, result)) = self.final_report() {
            decision.report(result);
        }
    }
}

impl Relay {
    /// This relay's stream and report, moved out to be read on after the client left (what
    /// stays behind reports nothing).
    fn take_for_drain(&mut self) -> Relay {
        let stream = CommittedStream {
            buffered: Vec::new(),
            body: std::mem::replace(
                &mut self.stream.body,
                UpstreamBody::Decoded(Box::pin(futures_util::stream::empty())),
            ),
            parser: std::mem::take(&mut self.stream.parser),
            usage: self.stream.usage,
            finished: self.stream.finished,
            format: self.stream.format,
            withhold_usage_only: self.stream.withhold_usage_only,
            idle: self.stream.idle,
            response_id: self.stream.response_id.take(),
            echoes: std::mem::take(&mut self.stream.echoes),
            trace: std::mem::take(&mut self.stream.trace),
            translator: self.stream.translator.take(),
            sealer: self.stream.sealer.take(),
            // What the client did not see is not kept.
            keeper: None,
            gemini_text: std::mem::take(&mut self.stream.gemini_text),
            chat_text: std::mem::take(&mut self.stream.chat_text),
        };
        Relay {
            stream,
            decision: self.decision.take(),
            deadline: self.deadline,
            failure: self.failure.take(),
            ended: self.ended,
            input_tokens: self.input_tokens.take(),
            client_usage: self.client_usage.take(),
            pending: None,
            charge: self.charge.clone(),
            precharged: self.precharged.take(),
            draining: true,
        }
    }

    /// Reads the upstream on for the usage the client did not wait for, then reports.
    async fn drain_then_report(mut self) {
        let sink = self
            .client_usage
            .as_ref()
            .filter(|sink| sink.watches_budget());
        let charge = &self.charge;
        let end = stream_drain::drain_for_usage(
            &mut self.stream.body,
            &mut self.stream.parser,
            self.stream.format,
            &mut self.stream.usage,
            self.charge.drain,
            |usage| sink.is_some_and(|sink| sink.budget_reached(&so_far(usage, charge))),
        )
        .await;
        tracing::debug!(
            connection = &*self.charge.connection,
            end = ?end,
            "read a left stream on for its usage"
        );
        self.report_applied().await;
    }
}

impl Drop for Relay {
    /// The client went away mid-stream: the upstream served, so the attempt counts as served,
    /// and is charged what it used — read on for (bounded) in the background, or estimated.
    fn drop(&mut self) {
        if self.decision.is_none() {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current();
        match runtime {
            Ok(runtime)
                if !self.draining
                    && !self.ended
                    && !self.stream.usage.final_seen
                    && self.charge.drain.reads() =>
            {
                self.precharge();
                let left = self.take_for_drain();
                runtime.spawn(left.drain_then_report());
            }
            _ => self.report(),
        }
    }
}
