/**
 * The pure part of the distributed (fleet) circuit breaker: what a replica knows of the fleet's state
 * (a {@link View}, decoded from a script reply: the only source a replica takes its state from), what state
 * a view means at a given time, and the per-replica deltas a replica counts between two flushes.
 *
 * The fleet's decisions themselves (adding deltas to the shared window, opening, permits) run in Redis,
 * in one Lua script (`internal/circuitBreaker/redisScript.ts`), atomically; {@link step} is their reference
 * in TypeScript, which the script follows line for line.
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

const finite = (x: unknown): number | undefined => {
  const n = typeof x === "number" ? x : typeof x === "string" && x !== "" ? Number(x) : NaN
  return Number.isFinite(n) ? n : undefined
}

/**
 * A view from its eight fields, in the script's order: inc, epoch, state, openUntil, isolated ("1"/"0"),
 * openings, changedAt, halfOpenUntil. `undefined` for anything malformed.
 */
export const fromFields = (fields: ReadonlyArray<unknown>): View | undefined => {
  if (fields.length !== 8) return undefined
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
 * A pub/sub message: the same eight fields joined by `|`. Anyone allowed to publish on the channel can send
 * one, so a replica never takes its state from it: at most it asks Redis (see {@link isNews}).
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
 * The fleet state as the script keeps it in Redis, and the script's semantics as a pure function
 * ({@link step}): the reference the Lua script (`internal/circuitBreaker/redisScript.ts`) follows line for
 * line, and that the Redis tests compare it with. Mutable and internal to the tests; replicas never use it.
 */
export interface Shared {
  inc: string | undefined
  epoch: number
  state: State
  openUntil: number
  isolated: boolean
  openings: number
  changedAt: number
  /** Half-open permits taken (trials running or succeeded) and succeeded, and when the last one's lease ends. */
  taken: number
  succeeded: number
  lease: number
  /**
   * The half-open period's deadline, set by its first permit, and the epoch it was set in: a deadline of
   * another epoch (one an older version of the script left behind) is none.
   */
  halfOpenUntil: number
  halfOpenEpoch: number
  /** consecutive: the run of failures; count window: chunks [calls, failures, slow], newest first; time: buckets. */
  run: number
  chunks: Array<[number, number, number]>
  buckets: Map<number, [number, number, number]>
}

export const emptyShared = (): Shared => ({
  inc: undefined,
  epoch: 0,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0,
  taken: 0,
  succeeded: 0,
  lease: 0,
  halfOpenUntil: 0,
  halfOpenEpoch: -1,
  run: 0,
  chunks: [],
  buckets: new Map()
})

export type Op = "flush" | "acquire" | "release" | "success" | "failure" | "isolate" | "reset"

export interface StepInput {
  readonly op: Op
  readonly now: number
  /** The epoch the caller's counts or trial belong to; -1 when it knows none. */
  readonly epoch: number
  /** The incarnation that epoch belongs to ("" when none): an epoch of another incarnation counts as none. */
  readonly inc: string
  /** The caller's per-process token: a new state's incarnation is `<token>.<now>`, new at each creation. */
  readonly token: string
  readonly delay: number
  readonly asked: number
  /** The `halfOpenTimeout` of the current half-open period (the caller's option, or its opening's delay). */
  readonly trialTimeout: number
  readonly permits: number
  readonly leaseMillis: number
  readonly trip: Trip
  readonly deltas: Deltas
}

export interface StepResult {
  readonly granted: boolean
  readonly view: View
  /** Whether the script publishes the view. */
  readonly published: boolean
}

const emptyWindow = (s: Shared) => {
  s.run = 0
  s.chunks = []
  s.buckets = new Map()
}

/** Adds a flush's counts to the window; true when the trip policy says open. */
const addCounts = (s: Shared, trip: Trip, d: Deltas, now: number): boolean => {
  if (trip._tag === "Consecutive") {
    s.run = d.sawSuccess ? d.trailing : s.run + d.trailing
    return s.run >= trip.failures
  }
  let c = 0
  let f = 0
  let sl = 0
  const w = trip.window
  if (w._tag === "Count") {
    s.chunks.unshift([d.calls, d.failures, d.slow])
    for (let i = 0; i < s.chunks.length; i++) {
      const [a, b, e] = s.chunks[i]!
      if (c + a >= w.calls) {
        const k = (w.calls - c) / a
        c = w.calls
        f += b * k
        sl += e * k
        s.chunks.length = i + 1
        break
      }
      c += a
      f += b
      sl += e
    }
  } else {
    const bucketMillis = w.millis / w.buckets
    const b = Math.floor(now / bucketMillis)
    const bucket = s.buckets.get(b) ?? [0, 0, 0]
    s.buckets.set(b, [bucket[0] + d.calls, bucket[1] + d.failures, bucket[2] + d.slow])
    for (const [index, [bc, bf, bs]] of s.buckets) {
      if (index <= b - w.buckets) {
        s.buckets.delete(index)
      } else {
        c += bc
        f += bf
        sl += bs
      }
    }
  }
  const slowRate = trip.slowCall?.rateThreshold ?? 0
  return c >= trip.minimumCalls && c > 0 && (f / c >= trip.threshold || (slowRate > 0 && sl / c >= slowRate))
}

/** One run of the script on `s` (updated in place). */
export const step = (s: Shared, input: StepInput): StepResult => {
  const { now } = input
  // each creation of the state is an incarnation of its own, even by the same replica: its epochs start over
  if (s.inc === undefined) s.inc = `${input.token}.${now}`
  // an epoch of another incarnation is no epoch of this one
  const known = input.epoch !== -1 && input.inc !== s.inc ? -1 : input.epoch
  let published = false
  let granted = false
  const enter = (to: State, at: number) => {
    s.epoch++
    s.state = to
    s.changedAt = at
    s.taken = s.succeeded = s.lease = 0
    published = true
  }
  const open = (at: number, asked: number) => {
    enter("open", at)
    s.openings++
    s.openUntil = at + Math.max(input.delay, asked)
    emptyWindow(s)
  }
  const close = () => {
    enter("closed", now)
    s.openings = 0
    s.isolated = false
    emptyWindow(s)
  }
  const lazyHalfOpen = () => {
    if (s.state === "open" && !s.isolated && now >= s.openUntil) enter("half-open", now)
  }
  lazyHalfOpen()
  // a half-open period whose trials have not all ended by its deadline opens again, as of that deadline
  const running = s.state === "half-open" && s.halfOpenEpoch === s.epoch && s.taken > s.succeeded
  if (running && now >= s.halfOpenUntil) {
    open(s.halfOpenUntil, 0)
    lazyHalfOpen()
  }
  const current = known === s.epoch
  switch (input.op) {
    case "flush":
      if (s.state === "closed" && input.deltas.calls > 0 && (known === -1 || current)) {
        if (addCounts(s, input.trip, input.deltas, now)) open(now, input.asked)
      }
      break
    case "acquire":
      if (s.state === "half-open") {
        if (s.taken >= input.permits && now >= s.lease) s.taken = s.succeeded
        if (s.taken < input.permits) {
          // the period's clock starts with its first trial (again, when every trial before gave its permit back)
          if (s.taken === 0 || s.halfOpenEpoch !== s.epoch) {
            s.halfOpenUntil = now + input.trialTimeout
            s.halfOpenEpoch = s.epoch
          }
          s.taken++
          s.lease = now + input.leaseMillis
          granted = true
        }
      }
      break
    case "release":
      if (s.state === "half-open" && current && s.taken > s.succeeded) s.taken--
      break
    case "success":
      if (s.state === "half-open" && current) {
        s.succeeded++
        if (s.succeeded >= input.permits) close()
      }
      break
    case "failure":
      if (s.state === "half-open" && current) open(now, input.asked)
      break
    case "isolate":
      if (!s.isolated) {
        if (s.state !== "open") enter("open", now)
        s.isolated = true
        published = true
      }
      break
    case "reset":
      close()
  }
  return {
    granted,
    published,
    view: {
      inc: s.inc,
      epoch: s.epoch,
      state: s.state,
      openUntil: s.openUntil,
      isolated: s.isolated,
      openings: s.openings,
      changedAt: s.changedAt,
      halfOpenUntil: s.state === "half-open" && s.halfOpenEpoch === s.epoch && s.taken > s.succeeded
        ? s.halfOpenUntil
        : 0
    }
  }
}
