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
 */

/** The three states; the number beside each is its gauge value. */
export type State = "closed" | "open" | "half-open"

export const gaugeValue = (state: State): number => state === "closed" ? 0 : state === "half-open" ? 1 : 2

export interface Machine {
  readonly state: State
  /** Held open by `isolate` until `reset`: the timer does not half-open it. */
  readonly isolated: boolean
  readonly generation: number
  /** When an open breaker turns half-open (epoch milliseconds); meaningless in other states. */
  readonly openUntil: number
  /** Openings since the breaker last closed: how far the `openFor` schedule has advanced. */
  readonly openings: number
  /** Half-open permits taken in this period: trials running or succeeded. */
  readonly admitted: number
  /** Trials running now, whatever half-open period admitted them. */
  readonly inFlight: number
  /** Trials of this period that succeeded. */
  readonly succeeded: number
}

export const initial: Machine = {
  state: "closed",
  isolated: false,
  generation: 0,
  openUntil: 0,
  openings: 0,
  admitted: 0,
  inFlight: 0,
  succeeded: 0
}

/** What a finished call meant for the breaker. Interruption (and failures that do not count) are `"ignored"`. */
export type Outcome = "success" | "failure" | "ignored"

/** A new period in state `to`: a new generation, no permit taken in it. */
const enter = (m: Machine, to: State, patch?: Partial<Machine>): Machine => ({
  ...m,
  ...patch,
  state: to,
  generation: m.generation + 1,
  admitted: 0,
  succeeded: 0
})

/** An open breaker whose time is up is half-open. Lazy: called before every decision and by the timer. */
export const refresh = (m: Machine, now: number): Machine =>
  m.state === "open" && !m.isolated && now >= m.openUntil ? enter(m, "half-open") : m

/** Opens for `delayMillis` (the caller's `openFor`, stepped for this opening). */
export const open = (m: Machine, now: number, delayMillis: number): Machine =>
  enter(m, "open", { openings: m.openings + 1, openUntil: now + delayMillis })

/** Closes: the `openFor` schedule starts over. */
export const close = (m: Machine): Machine => enter(m, "closed", { openings: 0 })

/** Opens and holds open until {@link reset}; a breaker already open only becomes isolated (same period). */
export const isolate = (m: Machine): Machine =>
  m.state === "open" ? (m.isolated ? m : { ...m, isolated: true }) : enter(m, "open", { isolated: true })

/** Closes, even when closed: a new period, so calls admitted before no longer count. */
export const reset = (m: Machine): Machine => close({ ...m, isolated: false })

/** How long a rejected caller should wait: zero in half-open, forever while isolated, else the time left open. */
export const retryAfterMillis = (m: Machine, now: number): number =>
  m.state !== "open" ? 0 : m.isolated ? Infinity : Math.max(0, m.openUntil - now)

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
 * Decides whether a call may run at `now`, taking a half-open permit when it runs as a trial. At most
 * `permits` trials run at once: a trial of an earlier half-open period still running keeps its permit.
 */
export const admit = (m0: Machine, now: number, permits: number): Admit => {
  const m = refresh(m0, now)
  if (m.state === "closed") return { machine: m, admission: { _tag: "Closed", generation: m.generation } }
  if (m.state === "open" || m.admitted >= permits || m.inFlight >= permits) {
    return { machine: m, admission: { _tag: "Rejected", retryAfterMillis: retryAfterMillis(m, now) } }
  }
  return {
    machine: { ...m, admitted: m.admitted + 1, inFlight: m.inFlight + 1 },
    admission: { _tag: "Trial", generation: m.generation }
  }
}

/** Whether a closed call of `generation` that ended with `outcome` goes to the trip policy. */
export const closedCounts = (m: Machine, generation: number, outcome: Outcome): boolean =>
  generation === m.generation && outcome !== "ignored"

/** What the caller must do after a trial ended. */
export type Verdict = "none" | "open" | "close"

export interface TrialEnd {
  /** With the permit settled; for `"open"` the caller then calls {@link open}, for `"close"` {@link close}. */
  readonly machine: Machine
  readonly verdict: Verdict
}

/**
 * A trial admitted in `generation` ended. A slow trial (the caller's slow-call rule) counts as failed.
 * An ignored outcome (interruption) gives its permit back; all `permits` trials succeeding closes.
 */
export const trialEnded = (
  m: Machine,
  generation: number,
  outcome: Outcome,
  slow: boolean,
  permits: number
): TrialEnd => {
  const running = { ...m, inFlight: m.inFlight - 1 }
  if (generation !== m.generation) return { machine: running, verdict: "none" }
  if (outcome === "ignored") return { machine: { ...running, admitted: running.admitted - 1 }, verdict: "none" }
  if (outcome === "failure" || slow) return { machine: running, verdict: "open" }
  const succeeded = running.succeeded + 1
  return { machine: { ...running, succeeded }, verdict: succeeded >= permits ? "close" : "none" }
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

/** A machine restored from a snapshot: open (or isolated) until `openUntil`, or half-open with no trial running. */
export const restore = (s: Saved): Machine => {
  if (s.isolated || s.state === "open") {
    return { ...initial, state: "open", isolated: s.isolated, openUntil: s.openUntil ?? 0, openings: s.openings }
  }
  return { ...initial, state: s.state, openings: s.openings }
}
