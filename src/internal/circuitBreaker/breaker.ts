import type { Clock, Context, Fiber, Scope } from "effect"
import {
  Cause,
  Data,
  Duration,
  Effect,
  FiberId,
  Layer,
  Metric,
  MetricLabel,
  PubSub,
  Queue,
  Runtime,
  Stream
} from "effect"
import type { CircuitBreaker, Options, Snapshot, State, Transition } from "../../CircuitBreaker.js"
import { type Config, resolve, stepSync, windowOf } from "./policy.js"
import { makeRecorder } from "./window.js"

export class CircuitOpen extends Data.TaggedError("CircuitOpen")<{ readonly retryAfter: Duration.Duration }> {
  override get message(): string {
    return `the circuit is open; retry after ${Duration.format(this.retryAfter)}`
  }
}

export const stateGauge = Metric.gauge("effect_resilience_breaker_state", {
  description: "circuit breaker state: 0 closed, 1 half-open, 2 open"
})

export const transitions = Metric.counter(
  "effect_resilience_breaker_transitions_total",
  { description: "circuit breaker state transitions", incremental: true }
)

export const rejections = Metric.counter(
  "effect_resilience_breaker_rejections_total",
  { description: "calls refused by an open circuit breaker", incremental: true }
)

// states as small integers: the gauge value, and cheap to compare on the hot path
const CLOSED = 0
const HALF_OPEN = 1
const OPEN = 2
const names: ReadonlyArray<State> = ["closed", "half-open", "open"]

// outcomes of a finished call, for the breaker
const SUCCEEDED = 0
const FAILED = 1
const IGNORED = 2

const handlers = <A, E, B, E2>(
  onSuccess: (a: A) => Effect.Effect<B, E2>,
  onFailure: (cause: Cause.Cause<E>) => Effect.Effect<B, E2>
) => ({ onSuccess, onFailure })

interface ClosedHandlers {
  readonly onSuccess: (a: unknown) => Effect.Effect<unknown, unknown>
  readonly onFailure: (cause: Cause.Cause<unknown>) => Effect.Effect<unknown, unknown>
}

/**
 * Sets an attribute on the current span, if any. (`Effect.annotateCurrentSpan` builds a
 * `NoSuchElementException`, stack trace included, when there is no span: too dear for a rejection path.)
 */
const annotate = (key: string, value: () => unknown): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const span = fiber.currentSpan
    if (span !== undefined && span._tag === "Span") span.attribute(key, value())
    return Effect.void
  })

/**
 * A rejection is the breaker's normal answer, not a bug: its stack trace says nothing and capturing one
 * costs more than the rest of the rejection, so it is built without.
 */
const circuitOpen = (retryAfter: Duration.Duration): CircuitOpen => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const error = new CircuitOpen({ retryAfter })
  Error.stackTraceLimit = limit
  return error
}

/** What a breaker takes from the fiber that builds it: its clock, and a runtime for timers and schedules. */
export interface Env {
  readonly clock: Clock.Clock
  readonly runtime: Runtime.Runtime<never>
}

export const make = (options: Options): Effect.Effect<CircuitBreaker, never, Scope.Scope> => {
  const config = resolve(options)
  return Effect.flatMap(env, (e) => build(config, e))
}

/**
 * A breaker and its internals for the keyed registry: `publish` writes the breaker's state to the gauge
 * again (after another breaker of the same labels, built in a race and dropped, reset it).
 */
export interface Built {
  readonly breaker: CircuitBreaker
  readonly publish: () => void
}

export const layer = <I>(tag: Context.Tag<I, CircuitBreaker>, options: Options): Layer.Layer<I> => {
  const config = resolve(options)
  return Layer.scoped(tag, Effect.flatMap(env, (e) => build(config, e)))
}

export const env: Effect.Effect<Env> = Effect.zipWith(
  Effect.clock,
  Effect.runtime<never>(),
  (clock, runtime) => ({ clock, runtime })
)

/**
 * Builds a breaker in the current scope. All state lives in local variables mutated synchronously: a
 * decision (check the state, take a permit) happens inside one synchronous step, so no other fiber can
 * interleave. Results are tagged with the generation they were admitted in — every transition (and
 * `reset`) starts a new one — and a result from another generation is ignored: the breaker moved on
 * meanwhile, so the call says nothing about the current period, closed or half-open.
 */
export const build = (config: Config, e: Env): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.map(buildInternal(config, e), (b) => b.breaker)

export const buildInternal = (config: Config, { clock, runtime }: Env): Effect.Effect<Built, never, Scope.Scope> =>
  Effect.gen(function*() {
    const changesHub = yield* PubSub.unbounded<Transition>()
    const { isFailure, labels, permits, schedule, slowMillis } = config
    const recorder = makeRecorder(config.trip)
    // whether a closed call's outcome needs the time: time windows and slow-call rules
    const timedClosed = recorder.timed || slowMillis !== undefined
    const gauge = stateGauge

    let state = CLOSED
    let isolated = false
    let generation = 0
    let openUntil = 0
    let openings = 0
    let admitted = 0 // half-open permits taken in this period: trials running or succeeded
    let inFlight = 0 // trials running now, whatever half-open period admitted them
    let succeeded = 0
    let scheduleState: unknown = schedule?.initial
    let replay = 0 // schedule steps owed after restoring `openings` from a snapshot
    let lastDelay = config.openForMillis
    let timer: Fiber.RuntimeFiber<void> | undefined
    let disposed = false

    const now = () => clock.unsafeCurrentTimeMillis()

    // the handlers shared by the calls admitted in the current closed generation, built on first use
    let closedHandlers: ClosedHandlers | undefined

    const reports = config.gauge !== "off"
    /** Writes the state to the gauge; a disposed breaker (a dropped key) no longer reports. */
    const publish = () => {
      if (reports && !disposed) gauge.unsafeUpdate(state, labels)
    }

    const transition = (to: number, at: number) => {
      const from = state
      state = to
      generation++
      closedHandlers = undefined
      admitted = succeeded = 0
      publish()
      if (from !== to) {
        transitions.unsafeUpdate(1, [
          ...labels,
          MetricLabel.make("from", names[from]!),
          MetricLabel.make("to", names[to]!)
        ])
        changesHub.unsafeOffer({ from: names[from]!, to: names[to]!, at })
      }
    }

    const cancelTimer = () => {
      if (timer !== undefined) {
        timer.unsafeInterruptAsFork(FiberId.none)
        timer = undefined
      }
    }

    /** An open breaker whose time is up becomes half-open; called lazily and by the timer. */
    const refresh = (at: number) => {
      if (state === OPEN && !isolated && at >= openUntil) transition(HALF_OPEN, at)
    }

    const onTimer = Effect.sync(() => {
      timer = undefined
      refresh(now())
    })

    const arm = (delay: number) => {
      cancelTimer()
      if (!disposed) timer = Runtime.runFork(runtime, Effect.zipRight(clock.sleep(Duration.millis(delay)), onTimer))
    }

    // a schedule that ends (or, against its probe at construction, fails) keeps the last delay
    const step = (at: number): void => {
      const r = stepSync(runtime, schedule!, at, openings, scheduleState)
      if (r._tag === "Delay") {
        scheduleState = r.state
        lastDelay = r.millis
      }
    }

    const open = (at: number) => {
      openings++
      if (schedule !== undefined) {
        for (; replay > 0; replay--) step(at)
        step(at)
      }
      openUntil = at + lastDelay
      recorder.reset()
      transition(OPEN, at)
      arm(lastDelay)
    }

    const close = (at: number) => {
      openings = 0
      replay = 0
      scheduleState = schedule?.initial
      recorder.reset()
      transition(CLOSED, at)
    }

    const classify = (cause: Cause.Cause<unknown>): number => {
      if (Cause.isInterruptedOnly(cause)) return IGNORED
      if (Cause.isDie(cause)) return FAILED
      const failure = Cause.failureOption(cause)
      if (failure._tag === "None") return IGNORED
      return isFailure(failure.value) ? FAILED : SUCCEEDED
    }

    /**
     * Records a call admitted while closed in generation `gen`; true when it changed the state. A call
     * admitted in an earlier period (before an opening, or a reset) that finishes later says nothing about
     * now, even if the breaker has closed again since.
     */
    const recordClosed = (gen: number, outcome: number, startedAt: number): boolean => {
      if (gen !== generation || outcome === IGNORED) return false
      const at = timedClosed ? now() : 0
      const slow = slowMillis !== undefined && at - startedAt > slowMillis
      if (!recorder.record(outcome === FAILED, slow, at)) return false
      open(timedClosed ? at : now())
      return true
    }

    /** Records a half-open trial; true when it changed the state. */
    const recordTrial = (gen: number, outcome: number, startedAt: number): boolean => {
      inFlight--
      if (gen !== generation) return false
      if (outcome === IGNORED) {
        admitted-- // an interrupted trial gives its permit back
        return false
      }
      const at = now()
      if (outcome === FAILED || (slowMillis !== undefined && at - startedAt > slowMillis)) {
        open(at)
        return true
      }
      if (++succeeded >= permits) {
        close(at)
        return true
      }
      return false
    }

    const annotateTransition = annotate("circuit_breaker.transition", () => names[state]!)
    const annotateRejection = annotate("circuit_breaker.rejected", () => names[state]!)

    /**
     * Runs `self` and feeds its outcome to `record`, annotating the span when that changed the state.
     * The handlers are arrows in argument position on purpose: loaders that keep function names (tsx,
     * esbuild's keepNames) wrap every *named* closure in a costly `__name` call.
     */
    const observe = <A, E, R>(
      self: Effect.Effect<A, E, R>,
      record: (outcome: number) => boolean
    ): Effect.Effect<A, E, R> =>
      Effect.matchCauseEffect(
        self,
        handlers(
          (a: A) => record(SUCCEEDED) ? Effect.zipRight(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
          (cause: Cause.Cause<E>) =>
            record(classify(cause))
              ? Effect.zipRight(annotateTransition, Effect.failCause(cause))
              : Effect.failCause(cause)
        )
      )

    // The closed path without a slow-call rule needs no per-call state: the calls of one closed generation
    // share handlers, built by the first of them and dropped at the next transition.
    const makeClosedHandlers = (gen: number): ClosedHandlers =>
      handlers(
        (a: unknown) =>
          recordClosed(gen, SUCCEEDED, 0) ? Effect.zipRight(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
        (cause: Cause.Cause<unknown>) =>
          recordClosed(gen, classify(cause), 0)
            ? Effect.zipRight(annotateTransition, Effect.failCause(cause))
            : Effect.failCause(cause)
      )

    const runClosed = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
      if (slowMillis === undefined) {
        const h = closedHandlers ??= makeClosedHandlers(generation)
        return Effect.matchCauseEffect(self, h) as Effect.Effect<A, E, R>
      }
      const startedAt = now()
      const gen = generation
      return observe(self, (outcome) => recordClosed(gen, outcome, startedAt))
    }

    const reject = (at: number): Effect.Effect<never, CircuitOpen> => {
      const retryAfter = state !== OPEN
        ? Duration.zero
        : isolated
        ? Duration.infinity
        : Duration.millis(Math.max(0, openUntil - at))
      rejections.unsafeUpdate(1, labels)
      return Effect.zipRight(annotateRejection, Effect.fail(circuitOpen(retryAfter)))
    }

    // Not closed: decide and take a permit in one synchronous step, uninterruptibly, so an interrupted
    // trial always reaches `recordTrial` and gives its permit back.
    const guarded = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend((): Effect.Effect<A, E | CircuitOpen, R> => {
          const at = now()
          refresh(at)
          if (state === CLOSED) return restore(runClosed(self))
          // a trial of an earlier half-open period still running holds its permit until it ends
          if (state === OPEN || admitted >= permits || inFlight >= permits) return reject(at)
          admitted++
          inFlight++
          const gen = generation
          return observe(restore(self), (outcome) => recordTrial(gen, outcome, at))
        })
      )

    const protect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.suspend(() => state === CLOSED ? runClosed(self) : guarded(self))

    const snapshot = (): Snapshot => {
      refresh(now())
      return {
        state: names[state]!,
        isolated,
        openUntil: state === OPEN && !isolated ? openUntil : null,
        openings,
        window: recorder.snapshot()
      }
    }

    // restore, then publish the starting state to the gauge
    const initial = config.initialState
    if (initial !== undefined) {
      const window = windowOf(initial)
      if (window !== undefined) recorder.restore(window)
      openings = replay = initial.openings
      isolated = initial.isolated
      if (initial.isolated || initial.state === "open") {
        state = OPEN
        openUntil = initial.openUntil ?? 0
        if (!isolated) arm(Math.max(0, openUntil - now()))
      } else if (initial.state === "half-open") {
        state = HALF_OPEN
      }
    }
    publish()

    // subscribed before the breaker is returned, so no transition can be missed
    const onTransition = config.onTransition
    if (onTransition !== undefined) {
      const subscription = yield* PubSub.subscribe(changesHub)
      yield* Queue.take(subscription).pipe(
        Effect.flatMap((t) =>
          Effect.catchAllCause(
            Effect.suspend(() => onTransition(t)),
            (cause) => Effect.logWarning("circuit breaker: onTransition failed", cause)
          )
        ),
        Effect.forever,
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        // a keyed breaker's series outlives it (Effect's registry keeps every label set): leave it closed
        if (config.gauge === "release" && !disposed) gauge.unsafeUpdate(CLOSED, labels)
        disposed = true
        const t = timer
        timer = undefined
        return Effect.zipRight(t === undefined ? Effect.void : t.interruptAsFork(FiberId.none), changesHub.shutdown)
      })
    )

    const breaker: CircuitBreaker = {
      protect,
      state: Effect.sync(() => {
        refresh(now())
        return names[state]!
      }),
      changes: Stream.fromPubSub(changesHub),
      subscribe: PubSub.subscribe(changesHub),
      isolate: Effect.sync(() => {
        cancelTimer()
        isolated = true
        if (state !== OPEN) {
          recorder.reset()
          transition(OPEN, now())
        }
      }),
      // a new closed period even when already closed: calls admitted before the reset no longer count
      reset: Effect.sync(() => {
        cancelTimer()
        isolated = false
        close(now())
      }),
      snapshot: Effect.sync(snapshot)
    }
    return { breaker, publish }
  })
