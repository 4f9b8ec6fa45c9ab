//! The fair order of requests waiting for a full pool (behaviour §11): one FIFO per client,
//! granted by integer deficit round-robin over the clients that wait, by weight. Pure: time is
//! an input (`now_ms`), it holds no permit, no reply port and no clock — the combo actor owns
//! those and asks this queue only *who is next*.
//!
//! The round-robin is the same integer scheme as §2 step 3 (smooth DRR): at each grant every
//! waiting client adds its weight to its deficit, the largest deficit is granted (ties: the
//! client that started waiting first) and pays Σw over the waiting clients. A client enters
//! with deficit 0 and leaves (deficit forgotten) when its FIFO empties, so a client alone never
//! builds up credit and one that comes back cannot take a burst; deficits are clamped to
//! [−Σw, +Σw]. Hence, while a set of clients all wait, each one's grants stay within 1 of
//! `N·w/Σw`, and a client that sends less than its share reaches the head within a few grants
//! whatever the others' backlog ([`FairQueue`] tests).
//!
//! Spare requests (behaviour §13 "Spare quota only") wait behind every other class: a client's
//! spare waiters are a queue of their own, and a spare queue is granted only while no normal
//! waiter is queued; the round-robin runs among the queues of the class whose turn it is, so
//! spare queues neither pay for nor earn from the normal turns.
//!
//! Bounds: at most [`QueueBounds::total`] waiters per combo and [`QueueBounds::per_client`]
//! per client; a request past either is refused at once ([`Enqueue::Full`]), so a flood from
//! one client fills its own share of the queue and never the light client's.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::smooth_drr::Turn;

/// One waiter's handle in the queue (the combo maps it to its reply port).
pub type Ticket = u64;

/// How many requests may wait at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueBounds {
    /// All clients together, per combo.
    pub total: usize,
    /// One client, per combo.
    pub per_client: usize,
}

/// The bounds a combo's queue runs with: a flood of one client may hold 1 024 waiters, all
/// clients together 8 192 (a waiter costs a few hundred bytes).
pub const DEFAULT_QUEUE_BOUNDS: QueueBounds = QueueBounds {
    total: 8_192,
    per_client: 1_024,
};

impl Default for QueueBounds {
    fn default() -> Self {
        DEFAULT_QUEUE_BOUNDS
    }
}

/// The result of [`FairQueue::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    Queued(Ticket),
    /// A bound is reached: answer `pool_busy` now.
    Full,
}

/// A waiter as the queue keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Waiter {
    ticket: Ticket,
    deadline_ms: u64,
}

/// One client's FIFO and its deficit while it waits.
#[derive(Debug, Clone)]
struct ClientQueue {
    id: Arc<str>,
    weight: u32,
    deficit: i64,
    /// Its spare-class waiters (behaviour §13), granted only when no normal waiter waits.
    spare: bool,
    waiters: VecDeque<Waiter>,
}

/// The waiting requests of one combo.
#[derive(Debug, Clone, Default)]
pub struct FairQueue {
    bounds: QueueBounds,
    /// Clients with at least one waiter, in the order they started waiting.
    clients: Vec<ClientQueue>,
    len: usize,
    next_ticket: Ticket,
}

impl FairQueue {
    pub fn new(bounds: QueueBounds) -> Self {
        FairQueue {
            bounds,
            ..FairQueue::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waiters of every client.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Waiters per client (clients with none are absent), in the order they started waiting;
    /// a client with spare and normal waiters is listed once per class.
    pub fn queued_by_client(&self) -> impl Iterator<Item = (&Arc<str>, usize)> {
        self.clients.iter().map(|c| (&c.id, c.waiters.len()))
    }

    /// Adds a waiter of `client` (weight ≥ 1; 0 counts as 1) answered by `deadline_ms`.
    pub fn enqueue(&mut self, client: &Arc<str>, weight: u32, deadline_ms: u64) -> Enqueue {
        self.enqueue_class(client, weight, deadline_ms, false)
    }

    /// [`FairQueue::enqueue`] for a request of the spare class (`spare`): it waits behind
    /// every normal waiter. Its bounds are its client's (both classes together).
    pub fn enqueue_class(
        &mut self,
        client: &Arc<str>,
        weight: u32,
        deadline_ms: u64,
        spare: bool,
    ) -> Enqueue {
        if self.len >= self.bounds.total {
            return Enqueue::Full;
        }
        let of_client: usize = self
            .clients
            .iter()
            .filter(|c| c.id == *client)
            .map(|c| c.waiters.len())
            .sum();
        if of_client >= self.bounds.per_client {
            return Enqueue::Full;
        }
        let at = match self
            .clients
            .iter()
            .position(|c| c.id == *client && c.spare == spare)
        {
            Some(at) => at,
            None => {
                self.clients.push(ClientQueue {
                    id: client.clone(),
                    weight: weight.max(1),
                    deficit: 0,
                    spare,
                    waiters: VecDeque::new(),
                });
                self.clients.len() - 1
            }
        };
        let queue = &mut self.clients[at];
        // The latest weight wins (a reload may change it).
        queue.weight = weight.max(1);
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        queue.waiters.push_back(Waiter {
            ticket,
            deadline_ms,
        });
        self.len += 1;
        Enqueue::Queued(ticket)
    }

    /// Removes a waiter that went away; whether it was still queued.
    pub fn cancel(&mut self, ticket: Ticket) -> bool {
        for at in 0..self.clients.len() {
            let waiters = &mut self.clients[at].waiters;
            if let Some(i) = waiters.iter().position(|w| w.ticket == ticket) {
                waiters.remove(i);
                self.len -= 1;
                self.leave_if_empty(at);
                return true;
            }
        }
        false
    }

    /// The client whose turn it is, without taking the turn: what [`FairQueue::grant`] would
    /// return now (its ticket and client).
    pub fn peek(&self) -> Option<(Ticket, &Arc<str>)> {
        let at = self.winner()?;
        let client = &self.clients[at];
        client.waiters.front().map(|w| (w.ticket, &client.id))
    }

    /// Takes the turn: the head waiter of the client with the largest deficit leaves the
    /// queue, and its client pays Σw. `None` when nobody waits.
    pub fn grant(&mut self) -> Option<(Ticket, Arc<str>)> {
        let at = self.winner()?;
        self.grant_at(at)
    }

    /// Every waiter in the order the turns would go to them now: the clients by the turn
    /// [`FairQueue::grant`] would give them (largest deficit first, ties to the client that
    /// started waiting first), each client's waiters in its FIFO order.
    pub fn in_order(&self) -> Vec<Ticket> {
        let mut clients: Vec<(bool, i64, usize)> = self
            .clients
            .iter()
            .enumerate()
            .map(|(at, client)| {
                (
                    client.spare,
                    -(client.deficit + i64::from(client.weight)),
                    at,
                )
            })
            .collect();
        clients.sort_unstable();
        clients
            .into_iter()
            .flat_map(|(_, _, at)| self.clients[at].waiters.iter().map(|w| w.ticket))
            .collect()
    }

    /// Takes the turn for `ticket` when the waiters before it in [`FairQueue::in_order`]
    /// cannot go now (each is bound to a connection at cap): its client pays Σw as a winner
    /// does and the others gain their weight as in any turn, so a client passed over comes
    /// first once it can go. `None` when `ticket` does not wait.
    pub fn grant_ticket(&mut self, ticket: Ticket) -> Option<(Ticket, Arc<str>)> {
        let (at, index) = self.clients.iter().enumerate().find_map(|(at, client)| {
            client
                .waiters
                .iter()
                .position(|w| w.ticket == ticket)
                .map(|index| (at, index))
        })?;
        // Deadlines keep growing along the FIFO (`expire`) when one leaves from its middle.
        let waiter = self.clients[at].waiters.remove(index)?;
        self.clients[at].waiters.push_front(waiter);
        self.grant_at(at)
    }

    /// Client `at`'s head waiter takes the turn.
    fn grant_at(&mut self, at: usize) -> Option<(Ticket, Arc<str>)> {
        let class = self.clients.get(at)?.spare;
        let turn = Turn::of(
            self.clients
                .iter()
                .filter(|c| c.spare == class)
                .map(|c| i64::from(c.weight)),
        );
        for (index, client) in self.clients.iter_mut().enumerate() {
            if client.spare == class {
                client.deficit =
                    turn.credit_after(client.deficit, i64::from(client.weight), index == at);
            }
        }
        let granted = &mut self.clients[at];
        let waiter = granted.waiters.pop_front()?;
        let id = granted.id.clone();
        self.len -= 1;
        self.leave_if_empty(at);
        Some((waiter.ticket, id))
    }

    /// Removes and returns every waiter whose deadline is at or before `now_ms`.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Ticket> {
        let mut expired = Vec::new();
        let mut at = 0;
        while at < self.clients.len() {
            let waiters = &mut self.clients[at].waiters;
            // Deadlines grow along each FIFO (see `cap_deadlines`): only fronts can be due.
            while waiters.front().is_some_and(|w| w.deadline_ms <= now_ms) {
                expired.extend(waiters.pop_front().map(|w| w.ticket));
                self.len -= 1;
            }
            if !self.leave_if_empty(at) {
                at += 1;
            }
        }
        expired
    }

    /// The earliest deadline of any waiter.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.clients
            .iter()
            .filter_map(|c| c.waiters.front().map(|w| w.deadline_ms))
            .min()
    }

    /// Brings every deadline to at most `deadline_ms` (a reload shortened the wait). Taking the
    /// minimum with one value keeps each FIFO's deadlines in order, which `expire` relies on.
    pub fn cap_deadlines(&mut self, deadline_ms: u64) {
        for client in &mut self.clients {
            for waiter in &mut client.waiters {
                waiter.deadline_ms = waiter.deadline_ms.min(deadline_ms);
            }
        }
    }

    /// Removes every waiter (the combo no longer queues); their tickets.
    pub fn drain(&mut self) -> Vec<Ticket> {
        let tickets = self
            .clients
            .drain(..)
            .flat_map(|c| c.waiters.into_iter().map(|w| w.ticket))
            .collect();
        self.len = 0;
        tickets
    }

    /// The index of the client granted next: largest deficit after this turn's additions,
    /// ties to the one that started waiting first.
    fn winner(&self) -> Option<usize> {
        // Spare queues have their turn only when no normal waiter waits.
        let class = self.clients.iter().all(|c| c.spare);
        let mut best: Option<(usize, i64)> = None;
        for (at, client) in self.clients.iter().enumerate() {
            if client.spare != class {
                continue;
            }
            let credit = client.deficit + i64::from(client.weight);
            if best.is_none_or(|(_, b)| credit > b) {
                best = Some((at, credit));
            }
        }
        best.map(|(at, _)| at)
    }

    /// Drops client `at` from the round when it has no waiter left; whether it did.
    fn leave_if_empty(&mut self, at: usize) -> bool {
        if self.clients[at].waiters.is_empty() {
            self.clients.remove(at);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    fn backlog(queue: &mut FairQueue, client: &Arc<str>, weight: u32, n: usize) -> Vec<Ticket> {
        (0..n)
            .map(|_| match queue.enqueue(client, weight, u64::MAX) {
                Enqueue::Queued(t) => t,
                Enqueue::Full => panic!("full"),
            })
            .collect()
    }

    /// Behaviour §13: a spare waiter goes after every normal waiter, whoever came first and
    /// whatever the weights; spare clients share the turns left among themselves.
    #[test]
    fn s13_spare_waiters_go_after_every_normal_waiter() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let (batch, team, evals) = (id("batch"), id("team"), id("evals"));
        let spare = |queue: &mut FairQueue, client: &Arc<str>, weight| match queue.enqueue_class(
            client,
            weight,
            u64::MAX,
            true,
        ) {
            Enqueue::Queued(t) => t,
            Enqueue::Full => panic!("full"),
        };
        let s1 = spare(&mut queue, &batch, 8);
        let s2 = spare(&mut queue, &batch, 8);
        let e1 = spare(&mut queue, &evals, 8);
        let normal = backlog(&mut queue, &team, 1, 2);
        // The same client may wait in both classes.
        let batch_normal = backlog(&mut queue, &batch, 8, 1);
        let order = queue.in_order();
        assert_eq!(&order[..3], &[batch_normal[0], normal[0], normal[1]]);
        assert_eq!(order.len(), 6);
        let granted: Vec<Ticket> = std::iter::from_fn(|| queue.grant().map(|(t, _)| t)).collect();
        assert_eq!(&granted[..3], &[batch_normal[0], normal[0], normal[1]]);
        assert_eq!(&granted[3..], &[s1, e1, s2]);
        // A normal waiter arriving behind spare ones still goes first.
        let s3 = spare(&mut queue, &batch, 8);
        let late = backlog(&mut queue, &team, 1, 1);
        assert_eq!(queue.peek().map(|(t, _)| t), Some(late[0]));
        assert_eq!(queue.in_order(), vec![late[0], s3]);
    }

    #[test]
    fn s11_weights_two_to_one_alternate_smoothly() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let (h, l) = (id("h"), id("l"));
        backlog(&mut queue, &h, 2, 30);
        backlog(&mut queue, &l, 1, 30);
        let order: String = (0..9)
            .map(|_| {
                if *queue.grant().unwrap().1 == *"h" {
                    'H'
                } else {
                    'L'
                }
            })
            .collect();
        assert_eq!(order, "HLHHLHHLH");
    }

    #[test]
    fn s11_the_order_follows_the_grants_and_a_passed_over_waiter_keeps_its_place() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let (a, b, c) = (id("a"), id("b"), id("c"));
        let a_tickets = backlog(&mut queue, &a, 1, 2);
        let b_tickets = backlog(&mut queue, &b, 2, 2);
        let c_tickets = backlog(&mut queue, &c, 1, 2);
        let order = queue.in_order();
        assert_eq!(
            order,
            vec![
                b_tickets[0],
                b_tickets[1],
                a_tickets[0],
                a_tickets[1],
                c_tickets[0],
                c_tickets[1]
            ]
        );
        assert_eq!(queue.peek().map(|p| p.0), Some(order[0]));
        // b's first cannot go (its connection is at cap): b's second goes in its place, and b
        // pays for the turn.
        assert_eq!(
            queue.grant_ticket(b_tickets[1]).map(|g| g.0),
            Some(b_tickets[1])
        );
        assert_eq!(queue.in_order()[0], a_tickets[0], "a's turn now");
        assert_eq!(queue.grant().map(|g| g.0), Some(a_tickets[0]));
        assert!(
            queue.in_order().contains(&b_tickets[0]),
            "b's first keeps waiting"
        );
        assert_eq!(queue.grant_ticket(99), None);
        assert_eq!(queue.len(), 4);
    }

    #[test]
    fn s11_fifo_within_a_client() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let a = id("a");
        let tickets = backlog(&mut queue, &a, 1, 5);
        let granted: Vec<Ticket> = std::iter::from_fn(|| queue.grant().map(|g| g.0)).collect();
        assert_eq!(granted, tickets);
        assert!(queue.is_empty());
    }

    #[test]
    fn s11_bounds_refuse_at_once_and_keep_the_light_clients_room() {
        let mut queue = FairQueue::new(QueueBounds {
            total: 5,
            per_client: 3,
        });
        let (h, l) = (id("h"), id("l"));
        backlog(&mut queue, &h, 1, 3);
        assert_eq!(queue.enqueue(&h, 1, 10), Enqueue::Full);
        backlog(&mut queue, &l, 1, 2);
        assert_eq!(queue.enqueue(&l, 1, 10), Enqueue::Full, "total bound");
        assert_eq!(queue.len(), 5);
    }

    #[test]
    fn s11_cancel_leaves_at_once_and_a_cancelled_waiter_is_never_granted() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let a = id("a");
        let tickets = backlog(&mut queue, &a, 1, 3);
        assert!(queue.cancel(tickets[1]));
        assert!(!queue.cancel(tickets[1]));
        assert_eq!(queue.len(), 2);
        let granted: Vec<Ticket> = std::iter::from_fn(|| queue.grant().map(|g| g.0)).collect();
        assert_eq!(granted, vec![tickets[0], tickets[2]]);
    }

    #[test]
    fn s11_expire_answers_exactly_the_due_waiters() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let (a, b) = (id("a"), id("b"));
        let Enqueue::Queued(a1) = queue.enqueue(&a, 1, 100) else {
            panic!()
        };
        let Enqueue::Queued(b1) = queue.enqueue(&b, 1, 150) else {
            panic!()
        };
        let Enqueue::Queued(a2) = queue.enqueue(&a, 1, 200) else {
            panic!()
        };
        assert_eq!(queue.next_deadline_ms(), Some(100));
        assert_eq!(queue.expire(99), Vec::<Ticket>::new());
        assert_eq!(queue.expire(150), vec![a1, b1]);
        assert_eq!(queue.next_deadline_ms(), Some(200));
        queue.cap_deadlines(120);
        assert_eq!(queue.expire(120), vec![a2]);
        assert!(queue.is_empty());
    }

    #[test]
    fn s11_queued_by_client_counts_each_clients_waiters() {
        let mut queue = FairQueue::new(QueueBounds::default());
        let (a, b) = (id("a"), id("b"));
        backlog(&mut queue, &a, 1, 3);
        backlog(&mut queue, &b, 1, 1);
        let counts: Vec<(String, usize)> = queue
            .queued_by_client()
            .map(|(id, n)| (id.to_string(), n))
            .collect();
        assert_eq!(counts, vec![("a".into(), 3), ("b".into(), 1)]);
    }

    /// An operation of the property tests.
    #[derive(Debug, Clone)]
    enum Op {
        Enqueue { client: usize, ttl: u64 },
        Grant,
        Cancel(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // One wait per client, as one combo's `queue_ms` gives: deadlines grow along a FIFO.
            (0usize..4).prop_map(|client| Op::Enqueue {
                client,
                ttl: 40 + 50 * client as u64
            }),
            Just(Op::Grant),
            (0usize..64).prop_map(Op::Cancel),
            (0u64..100).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// While two clients both wait, grants follow their weights within one.
        #[test]
        fn s11_two_waiting_clients_get_grants_within_one_of_their_weights(
            wa in 1u32..8, wb in 1u32..8, n in 1usize..200,
        ) {
            let mut queue = FairQueue::new(QueueBounds::default());
            let (a, b) = (id("a"), id("b"));
            backlog(&mut queue, &a, wa, 250);
            backlog(&mut queue, &b, wb, 250);
            let mut granted_a = 0i64;
            for step in 1..=n as i64 {
                if *queue.grant().unwrap().1 == *"a" {
                    granted_a += 1;
                }
                let ideal = step * i64::from(wa);
                let total = i64::from(wa + wb);
                // |granted·Σw − N·w| < Σw  ⇔  |granted − N·w/Σw| < 1
                prop_assert!((granted_a * total - ideal).abs() < total,
                    "after {step}: a has {granted_a}, weights {wa}:{wb}");
            }
        }

        /// A client that sends less than its share is not made to wait behind another's
        /// backlog: its first waiter comes within ⌈Σw / w⌉ + 1 grants, however long the heavy
        /// client's backlog and whatever happened before.
        #[test]
        fn s11_a_light_client_never_waits_behind_a_backlog(
            wh in 1u32..8, wl in 1u32..8, before in 0usize..50, backlog_n in 1usize..300,
        ) {
            let mut queue = FairQueue::new(QueueBounds::default());
            let (h, l) = (id("h"), id("l"));
            backlog(&mut queue, &h, wh, backlog_n + before + 10);
            for _ in 0..before {
                queue.grant();
            }
            let Enqueue::Queued(light) = queue.enqueue(&l, wl, u64::MAX) else { panic!() };
            let total = wh + wl;
            let bound = total.div_ceil(wl) as usize + 1;
            let position = (1..=bound + 1).find(|_| queue.grant().unwrap().0 == light);
            prop_assert!(position.is_some_and(|p| p <= bound),
                "light granted at {position:?}, bound {bound}, weights {wh}:{wl}");
        }

        /// The same bound whatever came before: the light client waited and left before (so
        /// the heavy one may hold credit), a third client comes and goes.
        #[test]
        fn s11_a_light_client_never_waits_behind_a_backlog_after_any_history(
            wh in 1u32..8, wl in 1u32..8, history in proptest::collection::vec(0u8..4, 0..80),
        ) {
            let mut queue = FairQueue::new(QueueBounds::default());
            let (h, l, m) = (id("h"), id("l"), id("m"));
            backlog(&mut queue, &h, wh, 400);
            for op in history {
                match op {
                    0 => { queue.enqueue(&l, wl, u64::MAX); }
                    1 => { queue.enqueue(&m, 2, u64::MAX); }
                    _ => { queue.grant(); }
                }
            }
            // Whatever l and m still had waiting is served (or gone) first.
            while queue.clients.iter().any(|c| *c.id != *"h") {
                queue.grant();
            }
            let Enqueue::Queued(light) = queue.enqueue(&l, wl, u64::MAX) else { panic!() };
            let total = wh + wl;
            let bound = total.div_ceil(wl) as usize + 1;
            let position = (1..=bound + 4).find(|_| queue.grant().unwrap().0 == light);
            prop_assert!(position.is_some_and(|p| p <= bound),
                "light granted at {position:?}, bound {bound}, weights {wh}:{wl}");
        }

        /// Every waiter is granted, cancelled or expired, never twice, and never after its
        /// deadline: whoever runs `expire(now)` before `grant` answers each by its deadline.
        #[test]
        fn s11_each_waiter_leaves_exactly_once_and_by_its_deadline(
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut queue = FairQueue::new(QueueBounds { total: 40, per_client: 15 });
            let clients: Vec<Arc<str>> = (0..4).map(|i| id(&format!("c{i}"))).collect();
            let mut now = 0u64;
            let mut live: std::collections::BTreeMap<Ticket, u64> = Default::default();
            let mut left = std::collections::BTreeSet::new();
            for op in ops {
                match op {
                    Op::Enqueue { client, ttl } => {
                        if let Enqueue::Queued(t) = queue.enqueue(&clients[client], client as u32 + 1, now + ttl) {
                            live.insert(t, now + ttl);
                        }
                    }
                    Op::Grant => {
                        for t in queue.expire(now) {
                            prop_assert!(live.remove(&t).is_some_and(|d| d <= now));
                            prop_assert!(left.insert(t));
                        }
                        if let Some((t, _)) = queue.grant() {
                            prop_assert!(live.remove(&t).is_some_and(|d| d > now), "granted after deadline");
                            prop_assert!(left.insert(t));
                        }
                    }
                    Op::Cancel(i) => {
                        if let Some(&t) = live.keys().nth(i % live.len().max(1)) {
                            prop_assert!(queue.cancel(t));
                            live.remove(&t);
                            left.insert(t);
                        }
                    }
                    Op::Advance(ms) => {
                        now += ms;
                        for t in queue.expire(now) {
                            prop_assert!(live.remove(&t).is_some_and(|d| d <= now));
                            prop_assert!(left.insert(t));
                        }
                        // Nobody still queued is past its deadline.
                        prop_assert!(live.values().all(|&d| d > now));
                    }
                }
                prop_assert_eq!(queue.len(), live.len());
            }
        }
    }
}
