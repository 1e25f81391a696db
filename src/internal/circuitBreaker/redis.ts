/**
 * The fleet breaker: one breaker state shared by every replica that uses the same `name`, kept in Redis.
 *
 * - closed: calls run with no Redis round trip; their outcomes are counted locally (`core/breakerFleet.ts`
 *   deltas) and flushed every `flushInterval`, or after `flushEvery` calls, by one Lua script that adds them
 *   to the fleet's window, opens the fleet breaker when the policy says so and replies the fleet state;
 * - a replica takes the fleet state from the replies of its own script calls only, whatever it believed
 *   before; the pub/sub message the script publishes on a transition only makes it flush at once
 *   (rate-limited: a burst, then one per `flushInterval`), as anyone who may publish on the channel can send one;
 * - half-open: every trial takes a permit in Redis (one round trip) and reports its outcome (another);
 * - Redis failing or slower than `timeout`: the replica switches to a local breaker (same policy), seeded
 *   with the fleet state it last knew, and rejoins when a flush is answered again.
 */
import type { Context, Fiber, Scope } from "effect"
import {
  Cause,
  Duration,
  Effect,
  Exit,
  FiberId,
  Layer,
  MetricLabel,
  PubSub,
  Queue,
  Random,
  Runtime,
  Schedule,
  Scope as ScopeModule,
  Stream
} from "effect"
import type { CircuitBreaker, Options as LocalOptions, Snapshot, State, Transition } from "../../CircuitBreaker.js"
import type { Options } from "../../CircuitBreaker/Redis.js"
import * as Machine from "../../core/breaker.js"
import * as Fleet from "../../core/breakerFleet.js"
import * as Window from "../../core/breakerWindow.js"
import * as redis from "../redis/client.js"
import { checkConnection, type Connection, escapePart } from "../redis/options.js"
import * as validate from "../validate.js"
import {
  buildInternal,
  type ClosedHandlers,
  type Env,
  env,
  forkOnTransition,
  makeClassifier,
  retryAfterOf
} from "./breaker.js"
import { type CircuitOpen, circuitOpen } from "./errors.js"
import { fleetFallback, fleetFallbacks, rejections, stateGauge, transitions } from "./metrics.js"
import { type Config, delayAt, resolve } from "./policy.js"
import { fleetScript } from "./redisScript.js"

export interface FleetConfig {
  readonly name: string
  readonly prefix: string
  readonly flushIntervalMillis: number
  readonly flushEvery: number
  readonly timeoutMillis: number
  readonly trialLeaseMillis: number
}

const what = "CircuitBreaker/Redis"

/**
 * Flushes that messages may prompt in a burst (then one per flushInterval): enough for the transitions that
 * follow each other closely (half-open, then the trial's verdict), not for a flood to make a replica loop.
 */
const PROMPT_BURST = 3

export const resolveFleet = (options: Options): { readonly config: Config; readonly fleet: FleetConfig } => {
  if (typeof options !== "object" || options === null) validate.invalid(`${what} options are required`)
  const name = options.name
  if (typeof name !== "string" || name === "") {
    validate.invalid(
      `${what} needs a name: replicas share a breaker by its name (got ${
        name === undefined ? "no name" : JSON.stringify(name)
      })`
    )
  }
  const connection = options.redis as Connection | undefined
  if (typeof connection !== "object" || connection === null) {
    validate.invalid(`${what} needs redis: { url }, { client } or { cluster }`)
  } else checkConnection(what, connection)
  const prefix = options.prefix ?? "cb:"
  if (typeof prefix !== "string" || /[{}]/.test(prefix)) {
    validate.invalid(`${what} prefix must be a string without "{" or "}", got ${String(prefix)}`)
  }
  const millis = (key: string, input: Duration.DurationInput | undefined, fallback: number) => {
    if (input === undefined) return fallback
    const ms = validate.millis(`${what} ${key}`, input, { finite: true })
    if (ms <= 0) validate.invalid(`${what} ${key} must be longer than zero`)
    return ms
  }
  const fleet: FleetConfig = {
    name,
    prefix,
    flushIntervalMillis: millis("flushInterval", options.flushInterval, 100),
    flushEvery: validate.positiveInt(`${what} flushEvery`, options.flushEvery ?? 1000),
    timeoutMillis: millis("timeout", options.timeout, 500),
    trialLeaseMillis: millis("trialLease", options.trialLease, 30_000)
  }
  const local: LocalOptions = {
    trip: options.trip,
    openFor: options.openFor,
    name,
    ...(options.halfOpenPermits === undefined ? {} : { halfOpenPermits: options.halfOpenPermits }),
    ...(options.halfOpenTimeout === undefined ? {} : { halfOpenTimeout: options.halfOpenTimeout }),
    ...(options.isFailure === undefined ? {} : { isFailure: options.isFailure }),
    ...(options.openForAtLeast === undefined ? {} : { openForAtLeast: options.openForAtLeast }),
    ...(options.onTransition === undefined ? {} : { onTransition: options.onTransition })
  }
  return { config: resolve(local), fleet }
}

/**
 * The keys and channel of one fleet breaker: one hash tag, so one Cluster slot. The window's key names the
 * trip policy (`Fleet.windowSignature`): a replica with another policy never reads a window it would misread.
 */
export const keysOf = (prefix: string, name: string, trip: Window.Trip) => {
  const base = `${prefix}{${escapePart(name)}}`
  return { state: base, window: `${base}:w:${Fleet.windowSignature(trip)}`, channel: `${base}:events` }
}

/**
 * The channel as the client reaches it: pub/sub knows no database and ioredis prefixes keys, not channels,
 * so the channel carries the client's `keyPrefix` (as its keys do in Redis) and its database when not 0 —
 * else a breaker of the same name in another database or app would hear this one's transitions.
 */
export const channelOf = (client: redis.Client, channel: string): string => {
  const options = client.options as { readonly keyPrefix?: string; readonly db?: number }
  const db = options.db ?? 0
  return `${options.keyPrefix ?? ""}${channel}${db === 0 ? "" : `:db${db}`}`
}

/** A script reply: whether a permit was granted, and the fleet view; `seq` numbers the call that got it. */
interface Reply {
  readonly granted: boolean
  readonly view: Fleet.View
  readonly seq: number
}

const decodeReply = (reply: unknown): Omit<Reply, "seq"> => {
  if (!Array.isArray(reply) || reply.length !== 9) throw new Error(`unexpected script reply: ${String(reply)}`)
  const view = Fleet.fromFields(reply.slice(1))
  if (view === undefined) throw new Error(`unexpected script reply: ${reply.join(",")}`)
  return { granted: reply[0] === 1, view }
}

export const make = (options: Options): Effect.Effect<CircuitBreaker, never, Scope.Scope> => {
  const resolved = resolveFleet(options)
  return Effect.flatMap(env, (e) => build(resolved.config, resolved.fleet, options.redis, e))
}

export const layer = <I>(tag: Context.Tag<I, CircuitBreaker>, options: Options): Layer.Layer<I> => {
  const resolved = resolveFleet(options)
  return Layer.scoped(tag, Effect.flatMap(env, (e) => build(resolved.config, resolved.fleet, options.redis, e)))
}

interface LocalBreaker {
  readonly breaker: CircuitBreaker
  readonly scope: Scope.CloseableScope
}

export const build = (
  config: Config,
  fleet: FleetConfig,
  connection: redis.ClientOptions,
  e: Env
): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { clock, runtime } = e
    const client = yield* redis.acquire(connection)
    const changesHub = yield* PubSub.unbounded<Transition>()
    const { isFailure, labels, openForAtLeast, permits, schedule, slowMillis } = config
    const keys = keysOf(fleet.prefix, fleet.name, config.trip)
    const channel = channelOf(client, keys.channel)
    const scriptKeys = [keys.state, keys.window]
    const policy = Fleet.policyArgs(config.trip)
    const token = `${(yield* Random.nextInt).toString(36)}${(yield* clock.currentTimeMillis).toString(36)}`
    const permitsArg = String(permits)
    const leaseArg = String(fleet.trialLeaseMillis)

    const now = () => clock.unsafeCurrentTimeMillis()

    let view: Fleet.View = Fleet.unknown
    let mode: "fleet" | "local" = "fleet"
    let local: LocalBreaker | undefined
    // the state callers see and transitions are reported for
    let shown: State = "closed"
    let disposed = false
    // the scope is closing: a Redis failure now (the last flush) must not start a local breaker
    let closing = false
    let flushing = false
    // a flush was asked for while one ran: run again as soon as it ends
    let flushAgain = false
    // flushes that messages may still prompt: a bucket of PROMPT_BURST, refilled by one per flushInterval
    let prompts = PROMPT_BURST
    let promptsAt = 0
    // script calls sent, and the number of the one whose reply the view is: an earlier call's reply that
    // arrives after a later one's is stale
    let sent = 0
    let applied = 0
    let timer: Fiber.RuntimeFiber<void> | undefined
    // the epoch in which this replica was refused a permit (every permit taken), and until when to believe it
    let deniedEpoch = -2
    let deniedUntil = 0
    const deltas = Fleet.makeDeltas()
    let closedHandlers: ClosedHandlers | undefined

    const publishGauge = () => {
      if (!disposed) stateGauge.unsafeUpdate(Machine.gaugeValue(shown), labels)
    }

    /** Shows `to`; a change is a transition (counted unless the local breaker counted it already). */
    const show = (to: State, at: number, count: boolean) => {
      const from = shown
      if (from === to) return
      shown = to
      publishGauge()
      if (count) transitions.unsafeUpdate(1, [...labels, MetricLabel.make("from", from), MetricLabel.make("to", to)])
      changesHub.unsafeOffer({ from, to, at })
    }

    const cancelTimer = () => {
      if (timer !== undefined) {
        timer.unsafeInterruptAsFork(FiberId.none)
        timer = undefined
      }
    }

    /** Shows the fleet view's state at `at` (fleet mode), arming the timer that half-opens an open view. */
    const sync = (at: number) => {
      if (mode !== "fleet") return
      const state = Fleet.stateAt(view, at)
      show(state, at, true)
      if (state === "open" && !view.isolated && timer === undefined && !disposed) {
        const delay = Math.max(0, view.openUntil - at)
        timer = Runtime.runFork(
          runtime,
          Effect.zipRight(
            clock.sleep(Duration.millis(delay)),
            Effect.sync(() => {
              timer = undefined
              sync(now())
            })
          )
        )
      }
    }

    /**
     * Takes the fleet state a script replied: Redis's state is the truth, whatever this replica believed
     * (an epoch going backwards included: Redis restored from an older snapshot). Only the reply to a call
     * sent before the one the view came from is dropped.
     */
    const apply = (reply: Reply) => {
      if (reply.seq < applied) return
      applied = reply.seq
      const next = reply.view
      if (Fleet.sameView(view, next)) return
      if (!Fleet.samePeriod(view, next)) {
        // the counts and refusals of the period that ended say nothing about the new one
        Fleet.clear(deltas)
        closedHandlers = undefined
        deniedEpoch = -2
      }
      cancelTimer()
      view = next
      sync(now())
    }

    /**
     * A message on the channel is never believed: anyone allowed to publish there can send one. One that
     * may be news (not the view this replica has) makes it flush at once, to learn the state from Redis —
     * rate-limited (a burst of PROMPT_BURST, then one per flushInterval) and coalesced with a flush already
     * due, so a flood of messages costs at most one script call per interval beyond the periodic flush.
     */
    const onMessage = (message: string) => {
      if (disposed || flushAgain || !Fleet.isNews(view, message)) return
      const at = now()
      prompts = Math.min(PROMPT_BURST, prompts + Math.max(0, at - promptsAt) / fleet.flushIntervalMillis)
      promptsAt = at
      if (prompts < 1) return
      prompts -= 1
      kick()
    }

    // the delays computed, by opening number: every script call passes the current and the next opening's,
    // which change only when the openings do
    const delays = new Map<number, number>()
    /** The `openFor` delay of the fleet's opening number `n` (its schedule stepped `n` times from the start). */
    const delayOf = (n: number, at: number): number => {
      if (schedule === undefined) return config.openForMillis
      const known = delays.get(n)
      if (known !== undefined) return known
      if (delays.size >= 8) delays.clear()
      const delay = delayAt(runtime, config, n, at)
      delays.set(n, delay)
      return delay
    }
    /** The current half-open period's timeout: the option, or the delay of the opening before it. */
    const trialTimeoutOf = (at: number): number => config.halfOpenTimeoutMillis ?? delayOf(view.openings, at)

    const run = (
      op: string,
      at: number,
      epoch: number,
      inc: string,
      asked: number,
      counts: ReadonlyArray<string>
    ): Effect.Effect<Reply, unknown> =>
      Effect.suspend(() => {
        const seq = ++sent
        return redis.runScript(
          client,
          fleetScript,
          scriptKeys,
          [
            op,
            String(at),
            String(epoch),
            token,
            channel,
            String(delayOf(view.openings + 1, at)),
            String(asked),
            permitsArg,
            leaseArg,
            ...policy,
            ...counts,
            inc,
            String(trialTimeoutOf(at))
          ],
          false,
          fleet.timeoutMillis,
          (reply) => ({ ...decodeReply(reply), seq }),
          (cause) => cause
        )
      })

    const noCounts = ["0", "0", "0", "0", "0"]

    // ---- falling back to a local breaker, and rejoining ----

    /** Switches to a local breaker seeded with the last known fleet state; one log line per switch. */
    const fallBack = (cause: unknown): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (mode === "local" || disposed || closing) return Effect.void
        mode = "local"
        cancelTimer()
        Fleet.clear(deltas)
        const at = now()
        const scope = Runtime.runSync(runtime, ScopeModule.make())
        const seed: Snapshot = { ...Fleet.saved(view, at), window: null as unknown as Snapshot["window"] }
        const built = Runtime.runSync(
          runtime,
          ScopeModule.extend(
            Effect.gen(function*() {
              const b = yield* buildInternal({ ...config, initialState: seed, onTransition: undefined }, e)
              const queue = yield* b.breaker.subscribe
              yield* Queue.take(queue).pipe(
                Effect.flatMap((t) => Effect.sync(() => show(t.to, t.at, false))),
                Effect.forever,
                Effect.forkScoped
              )
              return b.breaker
            }),
            scope
          )
        )
        local = { breaker: built, scope }
        fleetFallback.unsafeUpdate(1, labels)
        fleetFallbacks.unsafeUpdate(1, labels)
        return Effect.logWarning(
          `circuit breaker ${fleet.name}: Redis failed, this replica uses its own breaker until Redis answers`
        ).pipe(Effect.annotateLogs({
          breaker: fleet.name,
          state: shown,
          error: cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
        }))
      })

    const rejoin = (reply: Reply): Effect.Effect<void> =>
      Effect.suspend(() => {
        const l = local
        mode = "fleet"
        local = undefined
        applied = Math.max(applied, reply.seq)
        view = reply.view
        Fleet.clear(deltas)
        closedHandlers = undefined
        fleetFallback.unsafeUpdate(0, labels)
        sync(now())
        return Effect.zipRight(
          l === undefined ? Effect.void : ScopeModule.close(l.scope, Exit.void),
          Effect.logInfo(`circuit breaker ${fleet.name}: Redis answers again, this replica shares the fleet's state`)
            .pipe(Effect.annotateLogs({ breaker: fleet.name, state: shown }))
        )
      })

    // ---- flushing ----

    const flush: Effect.Effect<void> = Effect.suspend(() => {
      if (disposed) return Effect.void
      if (flushing) {
        flushAgain = true
        return Effect.void
      }
      flushing = true
      flushAgain = false
      const at = now()
      const epoch = view.epoch
      const inc = view.inc
      const asked = deltas.asked
      const counts = mode === "fleet" ? Fleet.take(deltas) : noCounts
      return run("flush", at, epoch, inc, asked, counts).pipe(
        Effect.matchEffect({
          onFailure: fallBack,
          onSuccess: (reply) => {
            if (disposed) return Effect.void
            if (mode === "local") return rejoin(reply)
            apply(reply)
            return Effect.void
          }
        }),
        Effect.ensuring(Effect.sync(() => {
          flushing = false
          // a flush asked for while this one ran (its interval came, or flushEvery calls) starts now, not a
          // whole interval later
          if (flushAgain && !closing) kick()
        }))
      )
    })

    const kick = () => {
      if (flushing) flushAgain = true
      else if (!disposed) Runtime.runFork(runtime, flush)
    }

    // ---- calls ----

    const classifier = makeClassifier(isFailure, openForAtLeast)
    const { classify } = classifier

    /** Counts a closed call admitted in epoch `epoch` (a call from an earlier period does not count). */
    const recordClosed = (epoch: number, outcome: Machine.Outcome, startedAt: number) => {
      if (outcome === "ignored" || epoch !== view.epoch || mode !== "fleet") return
      const slow = slowMillis !== undefined && now() - startedAt > slowMillis
      if (Fleet.record(deltas, outcome === "failure", slow, classifier.asked) >= fleet.flushEvery) kick()
    }

    const makeClosedHandlers = (epoch: number): ClosedHandlers => ({
      onSuccess: (a: unknown) => {
        recordClosed(epoch, "success", 0)
        return Effect.succeed(a)
      },
      onFailure: (cause: Cause.Cause<unknown>) => {
        recordClosed(epoch, classify(cause), 0)
        return Effect.failCause(cause)
      }
    })

    const runClosed = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
      if (slowMillis === undefined) {
        const h = closedHandlers ??= makeClosedHandlers(view.epoch)
        return Effect.matchCauseEffect(self, h) as Effect.Effect<A, E, R>
      }
      const startedAt = now()
      const epoch = view.epoch
      return Effect.matchCauseEffect(self, {
        onSuccess: (a: A) => {
          recordClosed(epoch, "success", startedAt)
          return Effect.succeed(a)
        },
        onFailure: (cause: Cause.Cause<E>) => {
          recordClosed(epoch, classify(cause), startedAt)
          return Effect.failCause(cause)
        }
      })
    }

    const reject = (retryAfterMillis: number): Effect.Effect<never, CircuitOpen> => {
      rejections.unsafeUpdate(1, labels)
      return Effect.fail(circuitOpen(retryAfterOf(retryAfterMillis)))
    }

    /** Reports a trial's end; a Redis failure switches to the local breaker (the call's result stands). */
    const report = (
      epoch: number,
      inc: string,
      outcome: Machine.Outcome,
      startedAt: number
    ): Effect.Effect<void> => {
      const asked = outcome === "failure" ? classifier.asked : 0 // what `classify` just read from this trial's failure
      return Effect.suspend(() => {
        const at = now()
        const slow = slowMillis !== undefined && at - startedAt > slowMillis
        const op = outcome === "ignored" ? "release" : outcome === "failure" || slow ? "failure" : "success"
        return run(op, at, epoch, inc, asked, noCounts).pipe(
          Effect.matchEffect({
            onFailure: fallBack,
            onSuccess: (reply) => Effect.sync(() => apply(reply))
          })
        )
      })
    }

    /** Half-open: take a permit in Redis, run as a trial, report the outcome. */
    const trial = <A, E, R>(self: Effect.Effect<A, E, R>, at: number): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.uninterruptibleMask((restore) =>
        run("acquire", at, view.epoch, view.inc, 0, noCounts).pipe(
          Effect.matchEffect({
            onFailure: (cause) =>
              Effect.zipRight(
                fallBack(cause),
                Effect.suspend(() => local === undefined ? restore(self) : restore(local.breaker.protect(self)))
              ),
            onSuccess: (reply): Effect.Effect<A, E | CircuitOpen, R> => {
              apply(reply)
              if (!reply.granted) {
                const at = now()
                // another replica's trial closed it meanwhile (or Redis says closed): a closed call after all
                if (mode === "fleet" && Fleet.stateAt(view, at) === "closed") return restore(runClosed(self))
                // every permit is taken: refuse without asking Redis again until the next flush
                deniedEpoch = reply.view.epoch
                deniedUntil = at + fleet.flushIntervalMillis
                return reject(Fleet.retryAfterMillis(reply.view, at, fleet.flushIntervalMillis))
              }
              const { epoch, inc } = reply.view
              const startedAt = now()
              return Effect.matchCauseEffect(restore(self), {
                onSuccess: (a: A) => Effect.as(report(epoch, inc, "success", startedAt), a),
                onFailure: (cause: Cause.Cause<E>) =>
                  Effect.zipRight(report(epoch, inc, classify(cause), startedAt), Effect.failCause(cause))
              })
            }
          })
        )
      )

    const guarded = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> => {
      if (mode === "local" && local !== undefined) return local.breaker.protect(self)
      const at = now()
      sync(at)
      const state = Fleet.stateAt(view, at)
      if (state === "closed") return runClosed(self)
      if (state === "open") return reject(Fleet.retryAfterMillis(view, at, fleet.flushIntervalMillis))
      // half-open: every permit of this period is taken (as far as this replica knows)
      if (deniedEpoch === view.epoch && at < deniedUntil) {
        return reject(Fleet.retryAfterMillis(view, at, fleet.flushIntervalMillis))
      }
      return trial(self, at)
    }

    // the hot path: closed in fleet mode runs the call with the period's shared handlers
    const protect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.suspend(() => shown === "closed" && mode === "fleet" ? runClosed(self) : guarded(self))

    const control = (op: "isolate" | "reset"): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (mode === "local" && local !== undefined) return local.breaker[op]
        return run(op, now(), view.epoch, view.inc, 0, noCounts).pipe(
          Effect.matchEffect({
            onFailure: (cause) =>
              Effect.zipRight(
                fallBack(cause),
                Effect.suspend(() => local === undefined ? Effect.void : local.breaker[op])
              ),
            onSuccess: (reply) => Effect.sync(() => apply(reply))
          })
        )
      })

    // ---- life cycle ----

    publishGauge()
    fleetFallback.unsafeUpdate(0, labels)
    yield* redis.subscribe(client, channel, fleet.timeoutMillis, onMessage)
    // learn the fleet's state before the first call (or fall back at once when Redis does not answer)
    yield* flush

    yield* forkOnTransition(changesHub, config.onTransition)

    // a flush every `flushInterval` from the last (a fixed rate, not a pause after each: the staleness bound
    // in docs/distributed-breaker.md); the first ran above
    yield* Effect.forkScoped(
      Effect.schedule(flush, Schedule.fixed(Duration.millis(fleet.flushIntervalMillis)))
    )

    // registered last, so it runs first: flush what is left (best effort, within `timeout`) before the
    // subscriber and the client go
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        const last = mode === "fleet" && deltas.calls > 0 && !flushing ? Effect.ignore(flush) : Effect.void
        return Effect.zipRight(
          last,
          Effect.suspend(() => {
            disposed = true
            cancelTimer()
            // the gauge says whether a live replica runs on its own: a disposed one does not
            if (mode === "local") fleetFallback.unsafeUpdate(0, labels)
            const l = local
            local = undefined
            return Effect.zipRight(
              l === undefined ? Effect.void : ScopeModule.close(l.scope, Exit.void),
              changesHub.shutdown
            )
          })
        )
      })
    )

    const breaker: CircuitBreaker = {
      protect,
      state: Effect.suspend(() => {
        if (mode === "local" && local !== undefined) return local.breaker.state
        const at = now()
        sync(at)
        return Effect.succeed(Fleet.stateAt(view, at))
      }),
      changes: Stream.fromPubSub(changesHub),
      subscribe: PubSub.subscribe(changesHub),
      isolate: control("isolate"),
      reset: control("reset"),
      snapshot: Effect.suspend(() => {
        if (mode === "local" && local !== undefined) return local.breaker.snapshot
        const at = now()
        return Effect.succeed<Snapshot>({ ...Fleet.saved(view, at), window: Window.snapshot(Window.make(config.trip)) })
      })
    }
    return breaker
  })
