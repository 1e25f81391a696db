/**
 * The pure part of a fleet (distributed) circuit breaker replica: what it knows of the fleet's state (a
 * {@link View}, decoded from a script reply: the only source a replica takes its state from), what state a view
 * means at a given time, the per-replica deltas it counts between two flushes, and how often a message on the
 * channel may make it ask Redis.
 *
 * The fleet's decisions themselves (adding deltas to the shared window, opening, permits) run in Redis, in one
 * Lua script (`internal/circuitBreaker/redisScript.ts`), atomically. `breakerFleetProtocol.ts` is the typed
 * protocol of that script (its arguments and reply); `breakerFleetModel.ts` its reference in TypeScript.
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
  /**
   * When the half-open period times out (epoch milliseconds) unless its running trials end first; 0 when no
   * trial of the period runs (or not half-open).
   */
  readonly halfOpenUntil: number
}

/**
 * The fields of a {@link View} as the script replies and publishes them, in this order: the one table the
 * Lua's reply, the channel's messages and {@link fromFields} are built from.
 */
export const viewFields = [
  "inc",
  "epoch",
  "state",
  "openUntil",
  "isolated",
  "openings",
  "changedAt",
  "halfOpenUntil"
] as const satisfies ReadonlyArray<keyof View>

/** Before the first answer from Redis: closed, in no known epoch (the first flush is accepted whatever it is). */
export const unknown: View = {
  inc: "",
  epoch: -1,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0,
  halfOpenUntil: 0
}

const states: ReadonlyArray<string> = ["closed", "open", "half-open"]

/** A finite number from a reply field (a Lua number or its `%.17g` string), else `undefined`. */
export const finite = (x: unknown): number | undefined => {
  const n = typeof x === "number" ? x : typeof x === "string" && x !== "" ? Number(x) : NaN
  return Number.isFinite(n) ? n : undefined
}

/**
 * A view from its fields in {@link viewFields} order (`isolated` is "1"/"0"). `undefined` for anything
 * malformed.
 */
export const fromFields = (fields: ReadonlyArray<unknown>): View | undefined => {
  if (fields.length !== viewFields.length) return undefined
  const [inc, e, state, until, iso, o, at, hou] = fields
  const epoch = finite(e)
  const openUntil = finite(until)
  const openings = finite(o)
  const changedAt = finite(at)
  const halfOpenUntil = finite(hou)
  if (
    typeof inc !== "string" || inc === "" || epoch === undefined || typeof state !== "string" ||
    !states.includes(state) || openUntil === undefined || (iso !== "0" && iso !== "1") ||
    openings === undefined || changedAt === undefined || halfOpenUntil === undefined
  ) return undefined
  return { inc, epoch, state: state as State, openUntil, isolated: iso === "1", openings, changedAt, halfOpenUntil }
}

/**
 * A pub/sub message: the view's fields joined by `|`. Anyone allowed to publish on the channel can send one,
 * so a replica never takes its state from it: at most it asks Redis (see {@link isNews}).
 */
export const fromMessage = (message: string): View | undefined => fromFields(message.split("|"))

/** Whether two views say the same in every field. */
export const sameView = (a: View, b: View): boolean =>
  a.inc === b.inc && a.epoch === b.epoch && a.state === b.state && a.openUntil === b.openUntil &&
  a.isolated === b.isolated && a.openings === b.openings && a.changedAt === b.changedAt &&
  a.halfOpenUntil === b.halfOpenUntil

/**
 * Whether a message may tell a replica that knows `known` something it does not: anything but the view it
 * already has (e.g. the message of its own transition) is worth asking Redis about.
 */
export const isNews = (known: View, message: string): boolean => {
  const v = fromMessage(message)
  return v === undefined || !sameView(known, v)
}

/** Whether two views are of the same period: the counts and trials of one say nothing about another. */
export const samePeriod = (a: View, b: View): boolean =>
  a.inc === b.inc && a.epoch === b.epoch && a.state === b.state && a.changedAt === b.changedAt

/** The state a view means at `now`: an open (not isolated) breaker whose time is up is half-open. */
export const stateAt = (v: View, now: number): State =>
  v.state === "open" && !v.isolated && now >= v.openUntil ? "half-open" : v.state

/**
 * How long a rejected caller should wait: forever while isolated, the time left open, and in half-open (every
 * permit taken) the time left in the period; when the view cannot tell that (its deadline has passed: the
 * replica learns what followed at its next flush), `unknownMillis`. Never zero but when closed.
 */
export const retryAfterMillis = (v: View, now: number, unknownMillis: number): number => {
  const state = stateAt(v, now)
  if (state === "closed") return 0
  if (state === "open") return v.isolated ? Infinity : Math.max(0, v.openUntil - now)
  return v.halfOpenUntil > now ? v.halfOpenUntil - now : unknownMillis
}

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

/** A copy of the deltas, which are then zeroed: what a flush sends. */
export const take = (d: Deltas): Deltas => {
  const taken = { ...d }
  clear(d)
  return taken
}

/** No counts: what every script call but a flush sends. */
export const noDeltas: Deltas = makeDeltas()

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

/**
 * The part of the window key that names the trip policy's window: `c` (consecutive), `n<calls>` (count
 * window), `t<bucket millis>x<buckets>` (time window). Replicas with another policy (a new version rolling
 * out) keep a window of their own, never one they would misread.
 */
export const windowSignature = (trip: Trip): string => {
  const [kind, p1, p2] = policyArgs(trip)
  return kind === "c" ? "c" : kind === "n" ? `n${p1}` : `t${p1}x${p2}`
}

/**
 * The flushes that messages may still prompt: a bucket of `burst`, refilled by one per interval. Enough for
 * the transitions that follow each other closely (half-open, then the trial's verdict); a flood of messages
 * cannot make a replica loop.
 */
export interface Prompts {
  readonly tokens: number
  readonly at: number
}

export const prompts = (burst: number): Prompts => ({ tokens: burst, at: 0 })

/** Takes a prompt at `now` if one is left: the bucket after, and whether the replica may flush now. */
export const prompt = (
  p: Prompts,
  now: number,
  intervalMillis: number,
  burst: number
): { readonly prompts: Prompts; readonly allowed: boolean } => {
  const tokens = Math.min(burst, p.tokens + Math.max(0, now - p.at) / intervalMillis)
  return tokens < 1
    ? { prompts: { tokens, at: now }, allowed: false }
    : { prompts: { tokens: tokens - 1, at: now }, allowed: true }
}
