/**
 * The fleet breaker script's protocol: what one call of it says ({@link Call}), the positional arguments that
 * carry it ({@link args}, {@link encode}) and what it replies ({@link replyFields}, {@link decodeReply}).
 *
 * The tables are the one description of the positions: the Lua script (`internal/circuitBreaker/redisScript.ts`)
 * names its arguments and builds its reply from them, and refuses a name that is not in them; {@link encode}
 * must give every argument (a missing or unknown one does not compile). The reference model
 * (`breakerFleetModel.ts`) takes the same {@link Call}, so the script and the model are fed the same input.
 */
import { type Deltas, finite, fromFields, policyArgs, type View, viewFields } from "./breakerFleet.js"
import type { Trip } from "./breakerWindow.js"

export type Op = "flush" | "acquire" | "release" | "success" | "failure" | "isolate" | "reset"

/** One script call, as a replica sends it. */
export interface Call {
  readonly op: Op
  readonly now: number
  /** The epoch the caller's counts or trial belong to; -1 when it knows none. */
  readonly epoch: number
  /** The incarnation that epoch belongs to ("" when none): an epoch of another incarnation counts as none. */
  readonly inc: string
  /**
   * When the period of that epoch began (its view's `changedAt`): a period of the same number that began at
   * another time (the state set back to an earlier snapshot, then moved on again) is another period.
   */
  readonly since: number
  /** The caller's per-process token: a new state's incarnation is `<token>.<now>`, new at each creation. */
  readonly token: string
  /** The `openFor` delay of the fleet's next opening. */
  readonly delay: number
  /** The longest `openForAtLeast` the caller's failures asked for (0: none). */
  readonly asked: number
  /** The `halfOpenTimeout` of the current half-open period (the caller's option, or its opening's delay). */
  readonly trialTimeout: number
  readonly permits: number
  /** The `halfOpenFailureRate` option: `undefined` for none (any failed trial reopens). */
  readonly failureRate: number | undefined
  /** How long a granted permit is held within its period (`trialLease`). */
  readonly leaseMillis: number
  readonly trip: Trip
  /** The counts a flush adds ({@link noDeltas} for every other op). */
  readonly deltas: Deltas
}

/**
 * The script's ARGV, in order (the Lua reads `A.<name>`). `channel` is where the script publishes a
 * transition; the trip policy is `kind`, `p1`, `p2`, `threshold`, `minimumCalls`, `slowRate` (`policyArgs`);
 * the deltas are `calls`, `failures`, `slow`, `trailing`, `sawSuccess` ("1"/"0").
 */
export const args = [
  "op",
  "now",
  "epoch",
  "inc",
  "since",
  "token",
  "channel",
  "delay",
  "asked",
  "trialTimeout",
  "permits",
  "failureRate",
  "lease",
  "kind",
  "p1",
  "p2",
  "threshold",
  "minimumCalls",
  "slowRate",
  "calls",
  "failures",
  "slow",
  "trailing",
  "sawSuccess"
] as const

export type Arg = (typeof args)[number]

/** The call as the script's ARGV, in {@link args} order. */
export const encode = (call: Call, channel: string): Array<string> => {
  const [kind, p1, p2, threshold, minimumCalls, slowRate] = policyArgs(call.trip)
  const d = call.deltas
  const named: { readonly [K in Arg]: string } = {
    op: call.op,
    now: String(call.now),
    epoch: String(call.epoch),
    inc: call.inc,
    since: String(call.since),
    token: call.token,
    channel,
    delay: String(call.delay),
    asked: String(call.asked),
    trialTimeout: String(call.trialTimeout),
    permits: String(call.permits),
    failureRate: call.failureRate === undefined ? "0" : String(call.failureRate),
    lease: String(call.leaseMillis),
    kind,
    p1,
    p2,
    threshold,
    minimumCalls,
    slowRate,
    calls: String(d.calls),
    failures: String(d.failures),
    slow: String(d.slow),
    trailing: String(d.trailing),
    sawSuccess: d.sawSuccess ? "1" : "0"
  }
  return args.map((a) => named[a])
}

/** What one call of the script decided. */
export interface Reply {
  /** A half-open permit was granted (`acquire`). */
  readonly granted: boolean
  /** This call's counts or trial report opened the breaker (not a half-open deadline, nor `isolate`). */
  readonly opened: boolean
  /** The fleet's state after the call. */
  readonly view: View
}

/** The script's reply, in order: `granted` and `opened` (1/0), then the view's fields ({@link viewFields}). */
export const replyFields = ["granted", "opened", ...viewFields] as const

/** A reply from the script's array, `undefined` for anything malformed. */
export const decodeReply = (reply: unknown): Reply | undefined => {
  if (!Array.isArray(reply) || reply.length !== replyFields.length) return undefined
  const [granted, opened] = [finite(reply[0]), finite(reply[1])]
  const view = fromFields(reply.slice(2))
  if ((granted !== 0 && granted !== 1) || (opened !== 0 && opened !== 1) || view === undefined) return undefined
  return { granted: granted === 1, opened: opened === 1, view }
}
