/**
 * The circuit breaker's state machine: closed, open, half-open, the half-open permits and the generations
 * that tell a stale outcome from a current one. Every function takes the machine and returns the next one
 * (the same object when nothing changed, so the hot path allocates nothing); time is an argument.
 *
 * What stays outside: the trip policy's counters (`breakerWindow.ts`), how long to stay open (the
 * caller steps its `openFor` schedule and passes the delay to {@link open}), timers, metrics and events.
 *
 * A generation is a period between two transitions. A call is admitted in one and its outcome counts only
 * if the breaker is still in it when the call ends: a result from before an opening (or a reset) says
 * nothing about the period now.
 *
 * A half-open period has a deadline, `trialTimeout` after a trial started while none of the period's was
 * running: a trial still running then is presumed hung, its period is over (the caller opens again, see
 * {@link expiredAt}) and its permit is freed. So a trial holds its permit until it ends or its period's deadline
 * passes, whichever comes first; a period with no trial running waits for callers as long as it takes.
 */

/** The three states; the number beside each is its gauge value. */
export type State = "closed" | "open" | "half-open"

export const gaugeValue = (state: State): number => state === "closed" ? 0 : state === "half-open" ? 1 : 2

/** A permit held by a running trial: admitted in `generation`, freed at `until` if the trial has not ended. */
export interface Lease {
  readonly generation: number
  readonly until: number
}

export interface Machine {
  readonly state: State
  /** Held open by `isolate` until `reset`: the timer does not half-open it. */
  readonly isolated: boolean
  readonly generation: number
  /** When an open breaker turns half-open (epoch milliseconds); meaningless in other states. */
  readonly openUntil: number
  /** Openings since the breaker last closed: how far the `openFor` schedule has advanced. */
  readonly openings: number
  /** The `halfOpenTimeout` of the half-open period that follows this opening, in milliseconds. */
  readonly trialTimeout: number
  /** When the half-open period times out: set by a trial admitted with none running; meaningless then. */
  readonly halfOpenUntil: number
  /** Half-open permits taken in this period: trials running or ended (succeeded or failed). */
  readonly admitted: number
  /** Trials of this period that succeeded. */
  readonly succeeded: number
  /** Trials of this period that failed (with `halfOpenFailureRate`: without it, the first failure reopens). */
  readonly failed: number
  /** The permits of the trials running now, whatever half-open period admitted them. */
  readonly leases: ReadonlyArray<Lease>
}

export const initial: Machine = {
  state: "closed",
  isolated: false,
  generation: 0,
  openUntil: 0,
  openings: 0,
  trialTimeout: 0,
  halfOpenUntil: 0,
  admitted: 0,
  succeeded: 0,
  failed: 0,
  leases: []
}

/**
 * What a finished call meant for the breaker. Interruption and the typed failures the caller ignores
 * (`isIgnored`) are `"ignored"`: neither a success nor a failure.
 */
export type Outcome = "success" | "failure" | "ignored"

/** A new period in state `to`: a new generation, no permit taken in it. */
const enter = (m: Machine, to: State, patch?: Partial<Machine>): Machine => ({
  ...m,
  ...patch,
  state: to,
  generation: m.generation + 1,
  admitted: 0,
  succeeded: 0,
  failed: 0
})

/**
 * An open breaker whose time is up is half-open, and a lease whose deadline has come is freed. Lazy: called
 * before every decision and by the timer (after {@link expiredAt}).
 */
export const refresh = (m0: Machine, now: number): Machine => {
  const m = m0.state === "open" && !m0.isolated && now >= m0.openUntil ? enter(m0, "half-open") : m0
  return m.leases.length > 0 && m.leases.some((l) => now >= l.until)
    ? { ...m, leases: m.leases.filter((l) => now < l.until) }
    : m
}

/**
 * The deadline of a half-open period that timed out at `now` (a trial it admitted was still running then),
 * or `undefined`. The caller then opens the breaker as of that deadline, with the next `openFor` delay.
 */
export const expiredAt = (m: Machine, now: number): number | undefined =>
  m.state === "half-open" && running(m) > 0 && now >= m.halfOpenUntil ? m.halfOpenUntil : undefined

/** The trials of the current half-open period that have not ended. */
export const running = (m: Machine): number => m.admitted - m.succeeded - m.failed

/**
 * Opens for `delayMillis` (the caller's `openFor`, stepped for this opening); the half-open period after it
 * times out `trialTimeoutMillis` after a trial started with none running.
 */
export const open = (m: Machine, now: number, delayMillis: number, trialTimeoutMillis: number): Machine =>
  enter(m, "open", { openings: m.openings + 1, openUntil: now + delayMillis, trialTimeout: trialTimeoutMillis })

/** Closes: the `openFor` schedule starts over. */
export const close = (m: Machine): Machine => enter(m, "closed", { openings: 0 })

/** Opens and holds open until {@link reset}; a breaker already open only becomes isolated (same period). */
export const isolate = (m: Machine): Machine =>
  m.state === "open" ? (m.isolated ? m : { ...m, isolated: true }) : enter(m, "open", { isolated: true })

/** Closes, even when closed: a new period, so calls admitted before no longer count. */
export const reset = (m: Machine): Machine => close({ ...m, isolated: false })

/**
 * How long a rejected caller should wait: forever while isolated, the time left open, and in half-open with
 * every permit taken the time until one is freed at the latest — the end of the period when the period's own
 * trials hold them, else the earliest lease of an earlier period's trial (never zero: a lease whose
 * deadline came is freed by {@link refresh}). Zero when a call would be admitted.
 */
export const retryAfterMillis = (m: Machine, now: number, permits: number): number => {
  if (m.state === "closed") return 0
  if (m.state === "open") return m.isolated ? Infinity : Math.max(0, m.openUntil - now)
  if (m.admitted >= permits) return Math.max(0, m.halfOpenUntil - now)
  if (m.leases.length < permits) return 0
  let earliest = Infinity
  for (const l of m.leases) if (l.until < earliest) earliest = l.until
  return Math.max(0, earliest - now)
}

export type Admission =
  /** Run it as a closed call of `generation`; report with {@link closedCounts}. */
  | { readonly _tag: "Closed"; readonly generation: number }
  /** Run it as a trial of `generation` (a permit is taken); report with {@link trialEnded}. */
  | { readonly _tag: "Trial"; readonly generation: number }
  | { readonly _tag: "Rejected"; readonly retryAfterMillis: number }

export interface Admit {
  readonly machine: Machine
  readonly admission: Admission
}

/**
 * Decides whether a call may run at `now`, taking a half-open permit when it runs as a trial (the caller has
 * handled {@link expiredAt} first). At most `permits` trials hold a permit at once: a trial of an earlier
 * half-open period still running keeps its permit until its own period's deadline.
 */
export const admit = (m0: Machine, now: number, permits: number): Admit => {
  const m = refresh(m0, now)
  if (m.state === "closed") return { machine: m, admission: { _tag: "Closed", generation: m.generation } }
  if (m.state === "open" || m.admitted >= permits || m.leases.length >= permits) {
    return { machine: m, admission: { _tag: "Rejected", retryAfterMillis: retryAfterMillis(m, now, permits) } }
  }
  // the period's clock starts with a trial admitted while none of the period's runs: it bounds how long trials
  // run, not how long the period waits for callers
  const until = running(m) === 0 ? now + m.trialTimeout : m.halfOpenUntil
  return {
    machine: {
      ...m,
      admitted: m.admitted + 1,
      halfOpenUntil: until,
      leases: [...m.leases, { generation: m.generation, until }]
    },
    admission: { _tag: "Trial", generation: m.generation }
  }
}

/** Whether a closed call of `generation` that ended with `outcome` goes to the trip policy. */
export const closedCounts = (m: Machine, generation: number, outcome: Outcome): boolean =>
  generation === m.generation && outcome !== "ignored"

/** What the caller must do after a trial ended. */
export type Verdict = "none" | "open" | "close"

/**
 * The verdict on a half-open period's sample: `permits` trials, of which `succeeded` and `failed` have ended.
 * Without a `failureRate`, any failed trial opens at once and all of them succeeding closes; with one (in
 * `(0, 1]`), nothing is decided before all `permits` have ended, and then it closes when
 * `failed / permits < failureRate`, else opens.
 */
export const halfOpenVerdict = (
  permits: number,
  succeeded: number,
  failed: number,
  failureRate: number | undefined
): Verdict => {
  if (failureRate === undefined && failed > 0) return "open"
  if (succeeded + failed < permits) return "none"
  return failed / permits < (failureRate ?? 1) ? "close" : "open"
}

export interface TrialEnd {
  /** With the permit settled; for `"open"` the caller then calls {@link open}, for `"close"` {@link close}. */
  readonly machine: Machine
  readonly verdict: Verdict
}

/**
 * A trial admitted in `generation` ended (the caller refreshed the machine first). A slow trial (the caller's
 * slow-call rule) counts as failed. An ignored outcome (interruption, `isIgnored`) gives its permit back and
 * decides nothing; the others go to {@link halfOpenVerdict}. A trial of another period, or one that outlived
 * its period's deadline (its permit freed), decides nothing.
 */
export const trialEnded = (
  m: Machine,
  generation: number,
  outcome: Outcome,
  slow: boolean,
  permits: number,
  failureRate: number | undefined
): TrialEnd => {
  const i = m.leases.findIndex((l) => l.generation === generation)
  const ended = i === -1 ? m : { ...m, leases: m.leases.filter((_, j) => j !== i) }
  if (generation !== m.generation || i === -1) return { machine: ended, verdict: "none" }
  if (outcome === "ignored") return { machine: { ...ended, admitted: ended.admitted - 1 }, verdict: "none" }
  const failed = outcome === "failure" || slow
  const machine = failed ? { ...ended, failed: ended.failed + 1 } : { ...ended, succeeded: ended.succeeded + 1 }
  return { machine, verdict: halfOpenVerdict(permits, machine.succeeded, machine.failed, failureRate) }
}

/** The restorable part of a machine, as in a breaker's snapshot. */
export interface Saved {
  readonly state: State
  readonly isolated: boolean
  readonly openUntil: number | null
  readonly openings: number
}

/** The machine to snapshot at `now` (an open breaker whose time is up reads as half-open). */
export const save = (m: Machine): Saved => ({
  state: m.state,
  isolated: m.isolated,
  openUntil: m.state === "open" && !m.isolated ? m.openUntil : null,
  openings: m.openings
})

/**
 * A machine restored from a snapshot: open (or isolated) until `openUntil`, or half-open with no trial
 * running; its half-open period times out `trialTimeoutMillis` after a trial started with none running.
 */
export const restore = (s: Saved, trialTimeoutMillis: number): Machine => {
  const base = { ...initial, openings: s.openings, trialTimeout: trialTimeoutMillis }
  if (s.isolated || s.state === "open") {
    return { ...base, state: "open", isolated: s.isolated, openUntil: s.openUntil ?? 0 }
  }
  return { ...base, state: s.state }
}
