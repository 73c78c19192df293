//! Limit pools: a call's place decided once over the dialects (see
//! `runner::pool` for the design). Each rate is a GCRA bucket: one
//! theoretical arrival time (TAT) per pool and dimension. A call drawing
//! `u` units of a rate of `count` per `per` moves the TAT by
//! `u · per / count`, and fits while the TAT stays within `per` of now: a
//! bucket of `count` that refills evenly. Every admission and settlement
//! of a pool locks its row first, so runners on any host take turns.

use crate::config::limits::Measure;
use crate::model::Millis;
use crate::store::api::{
    Admission, AttemptUsage, GonePlaces, PoolCall, PoolDim, PoolDimView, PoolHold, PoolSpec,
    PoolView, PoolWait, UsageSum,
};
use crate::store::dialect::{Read, Write};
use crate::store::{Result, Store};

/// How soon a call waiting for a place in flight asks again: a place is
/// given back by another runner's settlement, which this one cannot see.
pub const CONCURRENCY_RETRY_MS: i64 = 200;

/// Minutes of tokens the views show.
pub const POOL_MINUTES: i64 = 30;

/// The longest a view reads a pool's minutes back: its longest limit's
/// window, at most a week. `prune` keeps what is younger.
pub(super) const POOL_HISTORY_MS: Millis = 7 * 86_400_000;

impl PoolDim {
    /// The units one call draws from it.
    fn units(&self, estimate: i64) -> i64 {
        match self.measure {
            Measure::Requests => 1,
            _ => estimate.max(0),
        }
    }

    /// `units` as bucket time (µs); a call never draws more than the
    /// whole bucket, else it would never fit.
    fn cost_us(&self, units: i64) -> i64 {
        let units = i128::from(units.min(self.count));
        let cost = units * i128::from(self.per_us) / i128::from(self.count.max(1));
        i64::try_from(cost).unwrap_or(i64::MAX)
    }

    /// When a call drawing `units` fits in the bucket whose TAT is
    /// `tat_us`: once the TAT it leaves is within `per` of now. The one
    /// rule, for the calls admitted and for every view of a pool.
    fn fits_at(&self, tat_us: i64, units: i64) -> Millis {
        ms_up(
            tat_us
                .saturating_add(self.cost_us(units))
                .saturating_sub(self.per_us),
        )
    }

    /// Bucket time of a settlement: what was drawn beyond (or short of)
    /// the reservation, unclamped (a call that used more than its bucket
    /// leaves the bucket in debt).
    fn shift_us(&self, drawn: i64, reserved: i64) -> i64 {
        let delta = i128::from(drawn) - i128::from(reserved.min(self.count));
        let shift = delta * i128::from(self.per_us) / i128::from(self.count.max(1));
        let bound = i128::from(self.per_us) * 1000;
        i64::try_from(shift.clamp(-bound, bound)).unwrap_or(0)
    }

    /// The units of a settled attempt for this dimension. With no usage
    /// reported, its reservation stands, as drawn (capped at the bucket as
    /// it was): an estimate past the bucket (`max_tokens` of 5M against
    /// 1M a day) was charged back whole, and held every batch of the pool
    /// for days.
    fn drawn(&self, usage: &AttemptUsage) -> i64 {
        if usage.input_tokens.is_none() && usage.output_tokens.is_none() {
            return self.units(usage.estimate).min(self.count);
        }
        let (total, input, output) = usage.drawn();
        match self.measure {
            Measure::Requests => 1,
            Measure::Tokens => total,
            Measure::InputTokens => input,
            Measure::OutputTokens => output,
        }
    }
}

/// Millis from microseconds, rounded up (a slot is never early).
fn ms_up(us: i64) -> Millis {
    us.div_euclid(1000) + i64::from(us.rem_euclid(1000) != 0)
}

/// The pool's places in flight at `now`, judged by their runners' seats:
/// how many are live runners' (calls in flight), and those of runners
/// that are gone, with their keys. A runner is live while a seat of it, in
/// any batch, is live (`store::seat`: not lapsed, or its process seen
/// running here); one whose seats lapsed, or that is seen dead here, or
/// that holds none, has no call in flight: its guard stops its workers
/// before its seats can lapse, as a takeover of its items relies on.
/// A key without a host (an older version's) is judged live until it
/// lapses, as it was.
fn judged_places(
    tx: &mut dyn Read,
    pool: &str,
    now: Millis,
) -> Result<(i64, Vec<(String, GonePlaces)>)> {
    let places = tx.pool_places(pool, now)?;
    if places.is_empty() {
        return Ok((0, Vec::new()));
    }
    let seats = tx.all_seats()?;
    let mut live = 0;
    let mut gone = Vec::new();
    for (key, n, until) in places {
        let runner = crate::store::api::place_runner(&key);
        let seated = seats.iter().any(|l| {
            crate::store::api::place_key(&l.holder) == key && crate::store::seat(l, now).is_live()
        });
        match runner {
            Some(runner) if !seated => gone.push((
                key,
                GonePlaces {
                    runner,
                    places: n,
                    until,
                },
            )),
            _ => live += n,
        }
    }
    Ok((live, gone))
}

/// The admission of `calls` by the pool, its row locked: as many as fit,
/// in order, their reservations drawn and their places taken.
fn admit(
    tx: &mut dyn Write,
    spec: &PoolSpec,
    calls: &[PoolCall],
    now: Millis,
) -> Result<Admission> {
    let pool = spec.name.as_str();
    if let Some(h) = tx.pool_hold(pool)?.filter(|h| h.until > now) {
        let wait = PoolWait {
            dimension: crate::model::waiting::POOL_HOLD.into(),
            until: h.until,
        };
        return Ok(Admission {
            admitted: 0,
            wait: Some(wait),
        });
    }
    let mut room = calls.len();
    let mut wait = None;
    if let Some(cap) = spec.concurrency {
        tx.pool_places_expire(pool, now)?;
        let mut taken = tx.pool_in_flight(pool, now)?;
        if taken + i64::try_from(room).unwrap_or(i64::MAX) > i64::from(cap) {
            // Short of room: the places of runners that are gone are free
            // at once, not when they lapse (judged only then: it reads
            // every seat).
            let (live, gone) = judged_places(tx, pool, now)?;
            for (key, g) in &gone {
                tx.pool_places_give(pool, key, g.places)?;
            }
            taken = live;
        }
        let free = usize::try_from(i64::from(cap) - taken).unwrap_or(0);
        if free < room {
            room = free;
            wait = Some(PoolWait {
                dimension: "concurrency".into(),
                until: now + CONCURRENCY_RETRY_MS,
            });
        }
    }
    let now_us = now.saturating_mul(1000);
    let mut tats = Vec::with_capacity(spec.dims.len());
    for d in &spec.dims {
        let tat = tx.pool_tat(pool, &d.name)?.unwrap_or(now_us).max(now_us);
        let mut t = tat;
        let mut fit = 0;
        while fit < room {
            let units = d.units(calls[fit].estimate);
            if d.fits_at(t, units) > now {
                break;
            }
            t = t.saturating_add(d.cost_us(units));
            fit += 1;
        }
        room = room.min(fit);
        tats.push(tat);
    }
    // Each rate's TAT once the calls admitted now are drawn.
    let after: Vec<i64> = spec
        .dims
        .iter()
        .zip(&tats)
        .map(|(d, tat)| {
            let drawn: i64 = calls[..room]
                .iter()
                .map(|c| d.cost_us(d.units(c.estimate)))
                .sum();
            tat + drawn
        })
        .collect();
    // The next call's slot: when every rate has room for it after
    // the ones admitted now.
    if room < calls.len() {
        for (d, tat) in spec.dims.iter().zip(&after) {
            let next = calls[room].estimate;
            let fits = d.fits_at(*tat, d.units(next));
            if fits > now && wait.as_ref().is_none_or(|w: &PoolWait| fits > w.until) {
                wait = Some(PoolWait {
                    dimension: d.name.clone(),
                    until: fits,
                });
            }
        }
    }
    if room > 0 {
        for (d, tat) in spec.dims.iter().zip(&after) {
            tx.pool_set_tat(pool, &d.name, *tat)?;
        }
        if spec.concurrency.is_some() {
            // One row per runner counts its places (a slot's calls
            // are all its runner's).
            let mut taken: Vec<(&str, i64, Millis)> = Vec::new();
            for c in &calls[..room] {
                match taken.iter_mut().find(|t| t.0 == c.runner) {
                    Some(t) => (t.1, t.2) = (t.1 + 1, t.2.max(c.until)),
                    None => taken.push((&c.runner, 1, c.until)),
                }
            }
            for (runner, n, until) in taken {
                tx.pool_places_take(pool, runner, n, until)?;
            }
        }
    }
    Ok(Admission {
        admitted: room,
        wait,
    })
}

impl Store {
    /// Gives as many of `calls` as fit, in order, their places in the pool
    /// at `now`: not while the pool is held, within its calls in flight,
    /// within every rate. Their estimates are drawn at once; the places in
    /// flight are taken until each call's `until`. The items of claimed
    /// calls deferred are marked waiting for a place, in the same
    /// transaction (`pool_wait_since`), and unmarked once admitted.
    pub fn pool_admit(
        &mut self,
        spec: &PoolSpec,
        calls: &[PoolCall],
        now: Millis,
    ) -> Result<Admission> {
        let pool = spec.name.as_str();
        self.write_tx(|tx| {
            tx.pool_locked(pool)?;
            let admission = admit(tx, spec, calls, now)?;
            // The claims' items say whether they wait for their places.
            for (i, c) in calls.iter().enumerate() {
                match c.item {
                    Some(it) if i >= admission.admitted && !it.deferred => {
                        tx.item_pool_waits(it.id, it.token, now)?;
                    }
                    Some(it) if i < admission.admitted && it.deferred => {
                        tx.item_pool_placed(it.id)?;
                    }
                    _ => {}
                }
            }
            Ok(admission)
        })
    }

    /// Records the attempts' usage and, for those of `spec`'s pool, settles
    /// their reservations with what they drew (the estimate stands when
    /// nothing was reported) and gives back their places in flight. In
    /// sums: a line on each item that has something to say, one row per
    /// run, one per pool and minute, one per runner's places.
    pub fn settle_usage(&mut self, spec: Option<&PoolSpec>, usage: &[AttemptUsage]) -> Result<()> {
        if usage.is_empty() {
            return Ok(());
        }
        self.write_tx(|tx| {
            let pooled = spec.filter(|s| {
                usage
                    .iter()
                    .any(|u| u.pool.as_deref() == Some(s.name.as_str()))
            });
            if let Some(s) = pooled {
                tx.pool_locked(&s.name)?;
            }
            // The buckets move once per dimension for all of them.
            let mut shifts = vec![0i64; pooled.map_or(0, |s| s.dims.len())];
            let mut runs: Vec<(i64, UsageSum)> = Vec::new();
            let mut minutes: Vec<(&str, i64, UsageSum)> = Vec::new();
            let mut places: Vec<(&str, i64)> = Vec::new();
            for u in usage {
                if !u.with_done
                    && let Some(line) = u.line()
                {
                    tx.usage_item_append(&u.batch, &u.key, &line)?;
                }
                match runs.iter_mut().find(|r| r.0 == u.run_id) {
                    Some(r) => r.1.add(u),
                    None => runs.push((u.run_id, UsageSum::of(u))),
                }
                if let Some(p) = u.pool.as_deref() {
                    let m = u.at.div_euclid(60_000);
                    match minutes.iter_mut().find(|x| x.0 == p && x.1 == m) {
                        Some(x) => x.2.add(u),
                        None => minutes.push((p, m, UsageSum::of(u))),
                    }
                }
                let Some(s) = pooled.filter(|s| u.pool.as_deref() == Some(s.name.as_str())) else {
                    continue;
                };
                for (d, shift) in s.dims.iter().zip(shifts.iter_mut()) {
                    if d.measure != Measure::Requests {
                        *shift = shift.saturating_add(d.shift_us(d.drawn(u), d.units(u.estimate)));
                    }
                }
                if let Some(runner) = u.place.as_deref() {
                    match places.iter_mut().find(|p| p.0 == runner) {
                        Some(p) => p.1 += 1,
                        None => places.push((runner, 1)),
                    }
                }
            }
            for (run, sum) in &runs {
                tx.usage_run_add(*run, sum)?;
            }
            for (pool, minute, sum) in &minutes {
                tx.usage_pool_add(pool, *minute, sum)?;
            }
            if let Some(s) = pooled {
                for (runner, n) in places {
                    tx.pool_places_give(&s.name, runner, n)?;
                }
                for (d, shift) in s.dims.iter().zip(&shifts) {
                    if *shift != 0 {
                        tx.pool_shift_tat(&s.name, &d.name, *shift)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Gives back every place in flight of `runners`, in every pool: runs
    /// that died on this host, their workers stopped, so none of their
    /// calls is in flight any more (without this, each place stayed taken
    /// until its lapse, `item_timeout` + `grace` after its call started).
    pub fn forget_pool_places(&mut self, runners: &[String]) -> Result<()> {
        if runners.is_empty() {
            return Ok(());
        }
        self.write_tx(|tx| runners.iter().try_for_each(|r| tx.pool_places_forget(r)))
    }

    /// Holds every batch of the pool until `hold.until` (never shortens a
    /// hold on).
    pub fn set_pool_hold(&mut self, pool: &str, hold: &PoolHold) -> Result<()> {
        self.write_tx(|tx| tx.pool_extend_hold(pool, hold))
    }

    /// The pool's hold, while it is on at `now`.
    pub fn pool_hold(&self, pool: &str, now: Millis) -> Result<Option<PoolHold>> {
        self.read_tx(|tx| Ok(tx.pool_hold(pool)?.filter(|h| h.until > now)))
    }

    /// Lifts the pool's hold.
    pub fn clear_pool_hold(&mut self, pool: &str) -> Result<()> {
        self.write_tx(|tx| tx.pool_clear_hold(pool))
    }

    /// What the views show of a pool at `now`.
    pub fn pool_view(&self, spec: &PoolSpec, now: Millis) -> Result<PoolView> {
        self.read_tx(|tx| view(tx, spec, now))
    }

    /// The tokens of a run's attempts.
    pub fn run_usage(&self, run: i64) -> Result<UsageSum> {
        self.read_tx(|tx| tx.usage_of_run(run))
    }

    /// Every attempt's tokens of one item, oldest first.
    pub fn item_usage(&self, batch: &str, key: &str) -> Result<Vec<AttemptUsage>> {
        let lines = self.read_tx(|tx| tx.usage_of_item(batch, key))?;
        Ok(lines
            .as_deref()
            .unwrap_or("")
            .lines()
            .filter_map(|l| from_line(batch, key, l))
            .collect())
    }
}

impl UsageSum {
    fn of(u: &AttemptUsage) -> UsageSum {
        let mut s = UsageSum::default();
        s.add(u);
        s
    }

    fn add(&mut self, u: &AttemptUsage) {
        self.attempts += 1;
        self.input_tokens += u.input_tokens.unwrap_or(0);
        self.output_tokens += u.output_tokens.unwrap_or(0);
        if u.input_tokens.is_none() && u.output_tokens.is_none() {
            self.unreported += 1;
            self.estimated_tokens += u.estimate;
        } else {
            self.reported_estimate += u.estimate;
        }
    }
}

impl AttemptUsage {
    /// Its line kept on its item; `None` when it has nothing to say (no
    /// tokens reported, none reserved).
    #[must_use]
    pub fn line(&self) -> Option<String> {
        if self.input_tokens.is_none() && self.output_tokens.is_none() && self.estimate == 0 {
            return None;
        }
        // Short and plain (it rides in the done mark's JSON, read there
        // field by field): `run attempt at estimate input output pool`,
        // `-` for a count not reported, the pool the rest of the line.
        // Digits written straight into one buffer: through `format!` this
        // line was 2 % of a pooled run's instructions.
        let pool = self.pool.as_deref().unwrap_or("");
        let mut line = String::with_capacity(48 + pool.len());
        let mut digits = itoa::Buffer::new();
        let counts = [
            Some(self.run_id),
            Some(self.attempt),
            Some(self.at),
            Some(self.estimate),
            self.input_tokens,
            self.output_tokens,
        ];
        for count in counts {
            line.push_str(count.map_or("-", |v| digits.format(v)));
            line.push(' ');
        }
        line.push_str(pool);
        Some(line)
    }
}

/// An attempt from its line (`AttemptUsage::line`).
fn from_line(batch: &str, key: &str, line: &str) -> Option<AttemptUsage> {
    let mut f = line.splitn(7, ' ');
    let mut int = || f.next()?.parse::<i64>().ok();
    let (run_id, attempt, at, estimate) = (int()?, int()?, int()?, int()?);
    let (input_tokens, output_tokens) = (int(), int());
    let pool = f.next().filter(|p| !p.is_empty()).map(str::to_string);
    Some(AttemptUsage {
        batch: batch.to_string(),
        run_id,
        key: key.to_string(),
        attempt,
        pool,
        place: None,
        with_done: false,
        at,
        estimate,
        input_tokens,
        output_tokens,
    })
}

/// What the views show of a pool at `now`, in the caller's read (the
/// dashboard reads every pool in its one snapshot).
pub(super) fn view(tx: &mut dyn Read, spec: &PoolSpec, now: Millis) -> Result<PoolView> {
    let pool = spec.name.as_str();
    let now_us = now.saturating_mul(1000);
    let day_start = now - now.rem_euclid(86_400_000);
    let this_minute = now.div_euclid(60_000);
    // The minutes every figure needs: the sparkline's, the day's, and the
    // longest limit's window (a week at most).
    let longest = spec.dims.iter().map(|d| d.per_us / 1000).max().unwrap_or(0);
    let since = [
        this_minute - POOL_MINUTES + 1,
        day_start.div_euclid(60_000),
        (now - longest.clamp(60_000, POOL_HISTORY_MS)).div_euclid(60_000),
    ]
    .into_iter()
    .min()
    .unwrap_or(this_minute);
    let minutes = tx.pool_minutes(pool, since)?;
    let mut dims = Vec::with_capacity(spec.dims.len());
    for d in &spec.dims {
        let tat = tx.pool_tat(pool, &d.name)?.unwrap_or(now_us);
        dims.push(PoolDimView::read(d, tat, recent(d, &minutes, now), now));
    }
    let drawn = |u: &UsageSum| u.input_tokens + u.output_tokens + u.estimated_tokens;
    let per_minute: Vec<(i64, i64)> = minutes.iter().map(|(m, u)| (*m, drawn(u))).collect();
    let mut today = UsageSum::default();
    for (_, u) in minutes.iter().filter(|(m, _)| m * 60_000 >= day_start) {
        today.attempts += u.attempts;
        today.input_tokens += u.input_tokens;
        today.output_tokens += u.output_tokens;
        today.unreported += u.unreported;
        today.estimated_tokens += u.estimated_tokens;
    }
    let (in_flight, gone) = judged_places(tx, pool, now)?;
    Ok(PoolView {
        name: spec.name.clone(),
        dims,
        in_flight,
        gone: gone.into_iter().map(|(_, g)| g).collect(),
        concurrency: spec.concurrency,
        hold: tx.pool_hold(pool)?.filter(|h| h.until > now),
        tokens_per_minute: crate::store::dialect::fill_minutes(&per_minute, now, POOL_MINUTES),
        today,
    })
}

impl PoolDimView {
    /// A rate as the views see it at `now`, from its bucket's TAT and what
    /// its window counted.
    #[must_use]
    pub fn read(rate: &PoolDim, tat_us: i64, recent: i64, now: Millis) -> PoolDimView {
        let now_us = now.saturating_mul(1000);
        let tat_us = tat_us.max(now_us);
        let ahead = i128::from(tat_us - now_us);
        let per = i128::from(rate.per_us.max(1));
        let used = (ahead * i128::from(rate.count) + per - 1) / per;
        PoolDimView {
            dimension: rate.name.clone(),
            used: i64::try_from(used).unwrap_or(i64::MAX),
            recent,
            limit: rate.count,
            rate: rate.clone(),
            tat_us,
        }
    }

    /// What a call reserving `estimate` tokens draws from this rate: one
    /// request, or its tokens.
    #[must_use]
    pub fn units(&self, estimate: i64) -> i64 {
        self.rate.units(estimate)
    }

    /// When a call reserving `estimate` tokens next fits in this rate, by
    /// admission's rule; `None` when it fits at `now`.
    #[must_use]
    pub fn next_slot(&self, estimate: i64, now: Millis) -> Option<Millis> {
        let at = self.rate.fits_at(self.tat_us, self.units(estimate));
        (at > now).then_some(at)
    }
}

/// What a limit counts of its last window at `now`, from the per-minute
/// sums: the minutes wholly in it, and the oldest one in part, weighted
/// by its share of the window (calls spread evenly over it). A window
/// under a minute is the last minute's, scaled to it.
fn recent(d: &PoolDim, minutes: &[(i64, UsageSum)], now: Millis) -> i64 {
    let counted = |u: &UsageSum| match d.measure {
        Measure::Requests => u.attempts,
        Measure::Tokens => u.input_tokens + u.output_tokens + u.estimated_tokens,
        Measure::InputTokens => u.input_tokens + u.estimated_tokens,
        Measure::OutputTokens => u.output_tokens + u.estimated_tokens,
    };
    let window = (d.per_us / 1000).max(1);
    let span = window.max(60_000);
    let start = now - span;
    let first = start.div_euclid(60_000);
    let share = ((first + 1) * 60_000 - start) as f64 / 60_000.0;
    let mut sum = 0.0;
    for (m, u) in minutes.iter().filter(|(m, _)| *m >= first) {
        let n = counted(u) as f64;
        sum += if *m == first { n * share } else { n };
    }
    (sum * window as f64 / span as f64).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempts_line_reads_back_as_it_was_written() {
        let mut u = AttemptUsage {
            batch: "b".into(),
            run_id: 12,
            key: "k".into(),
            attempt: 3,
            pool: Some("openai".into()),
            place: None,
            with_done: false,
            at: 1_764_640_000_123,
            estimate: 1200,
            input_tokens: Some(0),
            output_tokens: None,
        };
        assert_eq!(
            u.line().as_deref(),
            Some("12 3 1764640000123 1200 0 - openai")
        );
        assert_eq!(from_line("b", "k", &u.line().unwrap()), Some(u.clone()));
        u.pool = None;
        u.output_tokens = Some(i64::MAX);
        assert_eq!(
            u.line().as_deref(),
            Some("12 3 1764640000123 1200 0 9223372036854775807 ")
        );
        assert_eq!(from_line("b", "k", &u.line().unwrap()), Some(u.clone()));
        let nothing = AttemptUsage {
            estimate: 0,
            input_tokens: None,
            output_tokens: None,
            ..u
        };
        assert_eq!(nothing.line(), None);
    }
}
