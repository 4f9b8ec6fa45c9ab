//! [`decide`]: one routing decision, composed once — §2's selection, §10's placement of the
//! conversation (or of encrypted items' maker), taking the first target that admits the
//! request now, and the `route_decided` record with the changes the turn makes to deficits,
//! leads and the group's binding. Pure: it reads the state and returns what to apply; the
//! caller applies it with `SelectionState::apply` and journals what that returns.

use crate::pace::ON_PACE;
use quotaroute_journal::CandidatePace;
use std::sync::Arc;

use quotaroute_journal::{BlockReason, RouteDecided, Skipped};

use crate::admission::{take_first_admitted, Admit};
use crate::affinity::{
    place, place_hard, turn_affinity, AffinitySettings, Placement, TurnAffinity,
};
use crate::quota_share::{select_into, SelectScratch, Selection, Strategy, TargetView};
use crate::selection::candidates::Candidates;
use crate::selection::state::{BindingChange, Changes, SelectionState};
use crate::selection::target::{AffinityKey, RoutedTarget};

/// The combo's settings a decision reads.
#[derive(Debug, Clone, Copy)]
pub struct ComboRules<'a> {
    /// The combo's name, shared with its config (the record takes a reference, not a copy).
    pub name: &'a Arc<str>,
    /// The config generation whose target list the record's indices point into.
    pub generation: u64,
    pub strategy: Strategy,
    pub affinity: AffinitySettings,
}

/// What one request brings to selection.
#[derive(Debug, Clone, Copy)]
pub struct SelectionRequest<'a> {
    /// The request's names, shared with the request (the record takes references, not copies).
    pub request_id: &'a Arc<str>,
    /// The model name the client sent.
    pub model: &'a Arc<str>,
    /// The client's id (behaviour §11).
    pub client: &'a Arc<str>,
    /// A stored response's connection (a hard affinity): only its targets are candidates.
    pub only_connection: Option<&'a str>,
    /// The connection that made the request's encrypted items (a hard affinity).
    pub encrypted_maker: Option<&'a str>,
    /// The conversation group; used only with affinity on and no hard affinity.
    pub group: Option<&'a AffinityKey>,
}

/// One decision.
#[derive(Debug)]
pub struct Decided<T> {
    /// Winner → rest with room → at cap → saturated, as positions in the candidates' targets.
    pub order: Vec<usize>,
    /// The first target of `order` that admitted the request (its offset in `order`) and
    /// what taking it gave; `None`: nothing admitted it (behaviour §7).
    pub taken: Option<(usize, T)>,
    pub placement: Placement,
    /// The journal record; its `skipped` lists hard-blocked targets and those passed over.
    pub route_decided: RouteDecided,
    /// What the turn changes besides the deficits (`SelectionState::apply`).
    pub changes: Changes,
}

/// Decides one request's route. `None` when there is no candidate (none of the request's
/// format, or none on its `only_connection`). `admit` is asked with positions in
/// `candidates.targets`: the live combo takes an in-flight slot (and a probe token), a
/// replay marks its own.
pub fn decide<A: Admit>(
    combo: &ComboRules<'_>,
    state: &SelectionState,
    candidates: Candidates<'_>,
    request: &SelectionRequest<'_>,
    admit: &mut A,
    now_ms: u64,
) -> Option<Decided<A::Taken>> {
    let mut scratch = SelectScratch::default();
    decide_with(
        combo,
        state,
        candidates,
        request,
        admit,
        now_ms,
        &mut scratch,
    )
}

/// [`decide`] with the selection's lists kept in `scratch` (the live combo's, reused from one
/// decision to the next). The same decision as [`decide`]: `scratch` is only overwritten.
pub fn decide_with<A: Admit>(
    combo: &ComboRules<'_>,
    state: &SelectionState,
    candidates: Candidates<'_>,
    request: &SelectionRequest<'_>,
    admit: &mut A,
    now_ms: u64,
    scratch: &mut SelectScratch,
) -> Option<Decided<A::Taken>> {
    let narrowed = candidates.on_connection(request.only_connection);
    let (positions, views) = (&*narrowed.positions, &*narrowed.views);
    if positions.is_empty() {
        return None;
    }
    let target_at = |i: usize| candidates.target(positions[i]);
    select_into(combo.strategy, views, &state.deficits, scratch);
    let selection = &mut scratch.selection;

    // Conversation affinity (behaviour §10), the strongest that holds: a stored response's
    // connection (the candidates already), encrypted items' maker, or the group.
    let settings = combo.affinity;
    let affinity = turn_affinity(
        request.only_connection,
        request.encrypted_maker,
        settings.enabled,
        || request.group,
    );
    let group = match affinity {
        TurnAffinity::Group(key) => Some(key),
        _ => None,
    };
    let bound_key: Option<Arc<str>> = group
        .and_then(|key| state.bindings.get(key.group, now_ms, settings.ttl_ms))
        .map(|binding| binding.exec_key.clone());
    let placement = match affinity {
        TurnAffinity::EncryptedMaker(maker) => {
            let made = (0..positions.len()).find(|&i| &*target_at(i).connection == maker);
            place_hard(made, views, selection)
        }
        TurnAffinity::Group(_) => place_group(combo, state, views, bound_key.as_ref(), selection),
        TurnAffinity::StoredResponse(_) | TurnAffinity::None => Placement::None,
    };

    // The order holds no hard-blocked target: only a probe token can be lost now.
    let order: Vec<usize> = selection.order.iter().map(|&i| positions[i]).collect();
    let mut passed_over = Vec::new();
    let taken = take_first_admitted(admit, &order, &mut passed_over);
    let skipped: Vec<Skipped> = selection
        .skipped
        .iter()
        .map(|&(i, reason, remaining_ms)| skipped_entry(target_at(i), reason, remaining_ms))
        .chain(
            passed_over
                .into_iter()
                .map(|(position, reason, remaining_ms)| {
                    skipped_entry(candidates.target(position), reason, remaining_ms)
                }),
        )
        .collect();

    let index_of = |i: usize| target_at(i).index;
    let route_decided = RouteDecided {
        request_id: request.request_id.clone(),
        generation: combo.generation,
        combo: combo.name.clone(),
        model: request.model.clone(),
        room: selection.room.iter().map(|&i| index_of(i)).collect(),
        // The target that pays the turn; nothing pays when nothing was taken.
        chosen: selection.chosen.filter(|_| taken.is_some()).map(index_of),
        order: selection.order.iter().map(|&i| index_of(i)).collect(),
        skipped,
        affinity: placement.outcome(),
        client: Some(request.client.clone()),
        group: group.map(|key| key.group),
        // Each candidate a window paces (§13); none listed is on pace. The DRR turn replays
        // from these.
        paces: views
            .iter()
            .enumerate()
            .filter(|(_, view)| view.pace_window.is_some() || view.pace != ON_PACE)
            .map(|(i, view)| CandidatePace {
                target: index_of(i),
                pace: view.pace,
                window: view.pace_window.clone(),
            })
            .collect(),
    };
    let binding = match (group, &taken) {
        (Some(key), Some((offset, _))) => {
            let at = selection.order[*offset];
            Some(binding_change(
                key,
                placement,
                bound_key,
                &views[at].exec_key,
                target_at(at),
                &route_decided,
            ))
        }
        _ => None,
    };
    Some(Decided {
        order,
        taken,
        placement,
        changes: Changes {
            leads: group.is_some(),
            binding,
        },
        route_decided,
    })
}

/// Places a turn of a group bound to `bound_key` (`None`: a new group), with how far the
/// bound target ran ahead of its DRR share.
fn place_group(
    combo: &ComboRules<'_>,
    state: &SelectionState,
    views: &[TargetView],
    bound_key: Option<&Arc<str>>,
    selection: &mut Selection,
) -> Placement {
    let bound = bound_key.map(|key| views.iter().position(|v| v.exec_key == *key));
    let room_weight: u32 = selection
        .room
        .iter()
        .map(|&i| combo.strategy.drr_weight(views[i].weight))
        .sum();
    let lead_exceeded = bound_key.is_some_and(|key| {
        state
            .leads
            .exceeded(key, combo.affinity.max_lead, room_weight)
    });
    place(bound, lead_exceeded, views, selection)
}

/// What a turn of `key`'s group that went to `taken` does to its binding: a held turn on its
/// binding touches it; a turn that [binds](Placement::binds) — or a held one whose probe
/// token went to another request first, so it was served elsewhere — binds the group there.
fn binding_change(
    key: &AffinityKey,
    placement: Placement,
    bound_key: Option<Arc<str>>,
    taken_key: &Arc<str>,
    taken: &RoutedTarget,
    decided: &RouteDecided,
) -> BindingChange {
    if !placement.binds() && bound_key.as_ref() == Some(taken_key) {
        return BindingChange::Touch { group: key.group };
    }
    let reason = match placement {
        Placement::Moved(reason) => Some(reason.as_str().to_owned()),
        Placement::Held => Some(BlockReason::ProbeInFlight.as_str().to_owned()),
        Placement::None | Placement::New => None,
    };
    BindingChange::Bind {
        client: key.client.clone(),
        exec_key: taken_key.clone(),
        bound: Box::new(quotaroute_journal::AffinityBound {
            request_id: decided.request_id.to_string(),
            combo: decided.combo.to_string(),
            group: key.group,
            client: String::from(&*key.client),
            provider: String::from(&*taken.provider),
            connection: String::from(&*taken.connection),
            model: String::from(&*taken.model),
            moved_from: bound_key.map(|k| k.to_string()),
            reason,
        }),
    }
}

fn skipped_entry(target: &RoutedTarget, reason: BlockReason, remaining_ms: Option<u64>) -> Skipped {
    Skipped {
        connection: String::from(&*target.connection),
        model: String::from(&*target.model),
        reason,
        remaining_ms,
    }
}
