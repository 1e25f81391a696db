/**
 * The pure part of the distributed (fleet) circuit breaker: what a replica knows of the fleet's state
 * (a {@link View}, decoded from a script reply or a pub/sub message), which of two views is the newer,
 * what state a view means at a given time, and the per-replica deltas a replica counts between two flushes.
 *
 * The fleet's decisions themselves (adding deltas to the shared window, opening, permits) run in Redis,
 * in one Lua script (`internal/circuitBreaker/redisScript.ts`); this module is the replica's side of it.
 */
import type { State } from "./breaker.js"
import type { Trip } from "./breakerWindow.js"

/**
 * The fleet's state as a replica last learned it. `epoch` is the fleet's period number (every transition
 * adds one); `inc` names the incarnation of the state in Redis (a new one when the key was lost, e.g. a
 * Redis restarted without persistence, so its epochs start over).
 */
export interface View {
  readonly inc: string
  readonly epoch: number
  readonly state: State
  /** When an open fleet breaker turns half-open (epoch milliseconds); meaningless in other states. */
  readonly openUntil: number
  readonly isolated: boolean
  /** Openings since the fleet breaker last closed: how far the `openFor` schedule has advanced. */
  readonly openings: number
  /** When the fleet entered this state (the `Clock` of the replica that moved it), epoch milliseconds. */
  readonly changedAt: number
}

/** Before the first answer from Redis: closed, in no known epoch (the first flush is accepted whatever it is). */
export const unknown: View = {
  inc: "",
  epoch: -1,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0
}

const states: ReadonlyArray<string> = ["closed", "open", "half-open"]

const finite = (x: unknown): number | undefined => {
  const n = typeof x === "number" ? x : typeof x === "string" && x !== "" ? Number(x) : NaN
  return Number.isFinite(n) ? n : undefined
}

/**
 * A view from its seven fields, in the script's order: inc, epoch, state, openUntil, isolated ("1"/"0"),
 * openings, changedAt. `undefined` for anything malformed.
 */
export const fromFields = (fields: ReadonlyArray<unknown>): View | undefined => {
  if (fields.length !== 7) return undefined
  const [inc, e, state, until, iso, o, at] = fields
  const epoch = finite(e)
  const openUntil = finite(until)
  const openings = finite(o)
  const changedAt = finite(at)
  if (
    typeof inc !== "string" || inc === "" || epoch === undefined || typeof state !== "string" ||
    !states.includes(state) || openUntil === undefined || (iso !== "0" && iso !== "1") ||
    openings === undefined || changedAt === undefined
  ) return undefined
  return { inc, epoch, state: state as State, openUntil, isolated: iso === "1", openings, changedAt }
}

/** A pub/sub message: the same seven fields joined by `|`. */
export const fromMessage = (message: string): View | undefined => fromFields(message.split("|"))

/**
 * Whether `next` replaces `known`. Within one incarnation epochs only grow, and a same-epoch view may only
 * add `isolated`; a view from another incarnation (the state in Redis was lost and started over) always wins.
 */
export const supersedes = (known: View, next: View): boolean =>
  next.inc !== known.inc || next.epoch > known.epoch || (next.epoch === known.epoch && next.isolated && !known.isolated)

/** The state a view means at `now`: an open (not isolated) breaker whose time is up is half-open. */
export const stateAt = (v: View, now: number): State =>
  v.state === "open" && !v.isolated && now >= v.openUntil ? "half-open" : v.state

/** How long a rejected caller should wait: zero in half-open, forever while isolated, else the time left open. */
export const retryAfterMillis = (v: View, now: number): number =>
  stateAt(v, now) !== "open" ? 0 : v.isolated ? Infinity : Math.max(0, v.openUntil - now)

/** The view as a breaker snapshot's state part, to seed the local breaker a replica falls back to. */
export const saved = (v: View, now: number) => {
  const state = stateAt(v, now)
  return {
    state,
    isolated: v.isolated,
    openUntil: state === "open" && !v.isolated ? v.openUntil : null,
    openings: v.openings
  }
}

/**
 * What a replica counted since its last flush, while the fleet was closed: updated in place (the hot path
 * allocates nothing), taken and zeroed by the flush.
 *
 * For `consecutive(n)`, `trailing` is the failures after the last success of this replica (all of them
 * when `sawSuccess` is false): the fleet's run of failures grows by `trailing`, or restarts from it when
 * this replica saw a success.
 */
export interface Deltas {
  calls: number
  failures: number
  slow: number
  trailing: number
  sawSuccess: boolean
  /** The longest `openForAtLeast` a counted failure asked for, in milliseconds (0: none). */
  asked: number
}

export const makeDeltas = (): Deltas => ({ calls: 0, failures: 0, slow: 0, trailing: 0, sawSuccess: false, asked: 0 })

/** Counts one closed call; returns the calls counted since the last flush. */
export const record = (d: Deltas, failed: boolean, slow: boolean, asked: number): number => {
  if (failed) {
    d.failures++
    d.trailing++
    if (asked > d.asked) d.asked = asked
  } else {
    d.sawSuccess = true
    d.trailing = 0
  }
  if (slow) d.slow++
  return ++d.calls
}

export const clear = (d: Deltas): void => {
  d.calls =
    d.failures =
    d.slow =
    d.trailing =
    d.asked =
      0
  d.sawSuccess = false
}

/** The deltas as the script's arguments (calls, failures, slow, trailing, sawSuccess), then zeroed. */
export const take = (d: Deltas): [string, string, string, string, string] => {
  const args: [string, string, string, string, string] = [
    String(d.calls),
    String(d.failures),
    String(d.slow),
    String(d.trailing),
    d.sawSuccess ? "1" : "0"
  ]
  clear(d)
  return args
}

/**
 * The trip policy as the script's arguments: kind (`c` consecutive, `n` count window, `t` time window),
 * then p1, p2, threshold, minimumCalls, slow-call rate (0: none).
 *
 * - consecutive: p1 = failures;
 * - count window: p1 = calls;
 * - time window: p1 = bucket milliseconds, p2 = buckets.
 */
export const policyArgs = (trip: Trip): [string, string, string, string, string, string] => {
  if (trip._tag === "Consecutive") return ["c", String(trip.failures), "0", "1", "1", "0"]
  const slow = trip.slowCall === undefined ? "0" : String(trip.slowCall.rateThreshold)
  const w = trip.window
  return w._tag === "Count"
    ? ["n", String(w.calls), "0", String(trip.threshold), String(trip.minimumCalls), slow]
    : ["t", String(w.millis / w.buckets), String(w.buckets), String(trip.threshold), String(trip.minimumCalls), slow]
}
