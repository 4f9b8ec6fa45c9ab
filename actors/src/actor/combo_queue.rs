//! The combo actor's waiting room (behaviour §11): the requests that found every target at cap,
//! their reply channels, and the watch on the targets' in-flight counts that wakes the combo
//! when a slot is released. Who goes next is `policy::fair_queue`'s; when a waiter may go
//! (room, selection) is the combo's. Only the combo actor touches this state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ractor::ActorRef;
use tokio::sync::oneshot;

use crate::actor::messages::{ComboMsg, PoolBusy, QueuedRoute, RouteReply, RouteRequest};
use crate::permit::InFlight;
use crate::policy::clients::class::RequestClass;
use crate::policy::fair_queue::{Enqueue, FairQueue, QueueBounds, Ticket};

/// `Retry-After` of a `pool_busy` answer: the pool frees as requests finish, so soon.
pub const POOL_BUSY_RETRY_AFTER_MS: u64 = 1_000;

/// One request waiting for a permit.
pub struct Waiter {
    pub request: RouteRequest,
    pub answer: oneshot::Sender<RouteReply>,
    pub since_ms: u64,
}

impl Waiter {
    /// Answers `pool_busy` (the request waited its `queue_ms`).
    pub fn busy(self, now_ms: u64) {
        let _ = self.answer.send(RouteReply::PoolBusy(PoolBusy {
            waited_ms: now_ms.saturating_sub(self.since_ms),
            retry_after_ms: POOL_BUSY_RETRY_AFTER_MS,
        }));
    }
}

/// A watcher key per combo actor (several combos may watch one connection).
static NEXT_WATCH_KEY: AtomicU64 = AtomicU64::new(1);

pub struct WaitQueue {
    order: FairQueue,
    waiting: HashMap<Ticket, Waiter>,
    /// The in-flight counts watched while someone waits (empty otherwise).
    watching: Vec<Arc<InFlight>>,
    watch_key: u64,
    /// Set by a release, cleared when the combo handles the wake-up: many releases between
    /// two turns of the actor send one message.
    wake_pending: Arc<AtomicBool>,
    /// The deadline the pending `QueueTick` timer was armed for.
    timer_at_ms: Option<u64>,
}

impl Default for WaitQueue {
    fn default() -> Self {
        WaitQueue {
            order: FairQueue::new(QueueBounds::default()),
            waiting: HashMap::new(),
            watching: Vec::new(),
            watch_key: NEXT_WATCH_KEY.fetch_add(1, Ordering::Relaxed),
            wake_pending: Arc::new(AtomicBool::new(false)),
            timer_at_ms: None,
        }
    }
}

impl WaitQueue {
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Queues `request` until `now_ms + queue_ms`; `None` when a bound is reached.
    pub fn enqueue(
        &mut self,
        request: RouteRequest,
        now_ms: u64,
        queue_ms: u64,
    ) -> Option<QueuedRoute> {
        let client = &request.client;
        let Enqueue::Queued(ticket) = self.order.enqueue_class(
            &client.id,
            client.weight,
            now_ms.saturating_add(queue_ms),
            client.class == RequestClass::Spare,
        ) else {
            return None;
        };
        let (answer, receiver) = oneshot::channel();
        self.waiting.insert(
            ticket,
            Waiter {
                request,
                answer,
                since_ms: now_ms,
            },
        );
        Some(QueuedRoute {
            ticket,
            answer: receiver,
            queue_ms,
        })
    }

    /// A waiter that went away leaves at once.
    pub fn cancel(&mut self, ticket: Ticket) {
        self.order.cancel(ticket);
        self.waiting.remove(&ticket);
    }

    /// Every waiter whose deadline passed, in queue order.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Waiter> {
        self.order
            .expire(now_ms)
            .into_iter()
            .filter_map(|ticket| self.waiting.remove(&ticket))
            .collect()
    }

    /// Every waiter in the fair order (`FairQueue::in_order`), after dropping those whose
    /// caller is gone.
    pub fn in_order(&mut self) -> Vec<Ticket> {
        let mut order = self.order.in_order();
        let gone: Vec<Ticket> = order
            .iter()
            .copied()
            .filter(|ticket| {
                self.waiting
                    .get(ticket)
                    .is_none_or(|w| w.answer.is_closed())
            })
            .collect();
        if !gone.is_empty() {
            for ticket in &gone {
                self.cancel(*ticket);
            }
            order.retain(|ticket| !gone.contains(ticket));
        }
        order
    }

    /// The request `ticket` waits with.
    pub fn request(&self, ticket: Ticket) -> Option<&RouteRequest> {
        self.waiting.get(&ticket).map(|w| &w.request)
    }

    /// Takes the turn of `ticket`, one of [`WaitQueue::in_order`].
    pub fn grant(&mut self, ticket: Ticket) -> Option<Waiter> {
        let (ticket, _) = self.order.grant_ticket(ticket)?;
        self.waiting.remove(&ticket)
    }

    /// Every waiter, in no particular order (the combo stops queueing).
    pub fn drain(&mut self) -> Vec<Waiter> {
        self.order
            .drain()
            .into_iter()
            .filter_map(|ticket| self.waiting.remove(&ticket))
            .collect()
    }

    /// A reload shortened `queue_ms`: nobody waits past `deadline_ms`.
    pub fn cap_deadlines(&mut self, deadline_ms: u64) {
        self.order.cap_deadlines(deadline_ms);
    }

    /// Waiters per client, both classes together (behaviour §13: a client's spare waiters
    /// are a queue of their own in the fair order).
    pub fn queued_by_client(&self) -> Vec<(Arc<str>, usize)> {
        let mut out: Vec<(Arc<str>, usize)> = Vec::new();
        for (id, n) in self.order.queued_by_client() {
            match out.iter_mut().find(|(seen, _)| seen == id) {
                Some((_, total)) => *total += n,
                None => out.push((id.clone(), n)),
            }
        }
        out
    }

    /// Deadline a `QueueTick` should be armed for, when it is earlier than the one armed.
    pub fn timer_needed(&mut self) -> Option<u64> {
        let next = self.order.next_deadline_ms()?;
        if self.timer_at_ms.is_some_and(|armed| armed <= next) {
            return None;
        }
        self.timer_at_ms = Some(next);
        Some(next)
    }

    /// The armed tick fired.
    pub fn timer_fired(&mut self) {
        self.timer_at_ms = None;
    }

    /// A wake-up message was handled: the next release sends another.
    pub fn woken(&self) {
        self.wake_pending.store(false, Ordering::SeqCst);
    }

    /// Watches `in_flight` (the combo's targets) so releases wake `combo`, if not already.
    pub fn watch<'a>(
        &mut self,
        in_flight: impl Iterator<Item = &'a Arc<InFlight>>,
        combo: &ActorRef<ComboMsg>,
    ) {
        if !self.watching.is_empty() {
            return;
        }
        let pending = self.wake_pending.clone();
        let combo = combo.clone();
        let watcher: crate::permit::ReleaseWatcher = Arc::new(move || {
            if !pending.swap(true, Ordering::SeqCst) {
                let _ = combo.cast(ComboMsg::PermitReleased);
            }
        });
        for counter in in_flight {
            if !self.watching.iter().any(|w| Arc::ptr_eq(w, counter)) {
                counter.watch(self.watch_key, watcher.clone());
                self.watching.push(counter.clone());
            }
        }
    }

    /// Stops watching (nobody waits, or the targets changed).
    pub fn unwatch(&mut self) {
        for counter in self.watching.drain(..) {
            counter.unwatch(self.watch_key);
        }
    }
}

impl Drop for WaitQueue {
    fn drop(&mut self) {
        self.unwatch();
    }
}
