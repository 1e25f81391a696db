import type { Clock, Context, Fiber, Scope } from "effect"
import { Cause, Duration, Effect, FiberId, Layer, MetricLabel, PubSub, Queue, Runtime, Stream } from "effect"
import type { CircuitBreaker, Options, Snapshot, Transition } from "../../CircuitBreaker.js"
import * as Machine from "../../core/breaker.js"
import * as Window from "../../core/breakerWindow.js"
import { type CircuitOpen, circuitOpen } from "./errors.js"
import { rejections, stateGauge, transitions } from "./metrics.js"
import { type Config, delayAt, resolve, stepSync } from "./policy.js"

export { CircuitOpen } from "./errors.js"
export { rejections, stateGauge, transitions } from "./metrics.js"

const handlers = <A, E, B, E2>(
  onSuccess: (a: A) => Effect.Effect<B, E2>,
  onFailure: (cause: Cause.Cause<E>) => Effect.Effect<B, E2>
) => ({ onSuccess, onFailure })

export interface ClosedHandlers {
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

export const retryAfterOf = (millis: number): Duration.Duration =>
  millis === 0 ? Duration.zero : millis === Infinity ? Duration.infinity : Duration.millis(millis)

/**
 * What a finished call meant for a breaker (`classify`), and what the last failure it classified asked for
 * through `openForAtLeast`, in milliseconds (`asked`, 0 for nothing usable). One per breaker: `asked` is read
 * right after `classify`, in the same synchronous step.
 */
export interface Classifier {
  readonly classify: (cause: Cause.Cause<unknown>) => Machine.Outcome
  readonly asked: number
}

export const makeClassifier = (
  isFailure: (error: unknown) => boolean,
  openForAtLeast: ((error: unknown) => Duration.Duration | undefined) | undefined
): Classifier => {
  const c = {
    asked: 0,
    classify: (cause: Cause.Cause<unknown>): Machine.Outcome => {
      if (Cause.isInterruptedOnly(cause)) return "ignored"
      c.asked = 0
      if (Cause.isDie(cause)) return "failure"
      const failure = Cause.failureOption(cause)
      if (failure._tag === "None") return "ignored"
      if (!isFailure(failure.value)) return "success"
      if (openForAtLeast !== undefined) {
        const asked = openForAtLeast(failure.value)
        const millis = asked === undefined ? 0 : Duration.toMillis(asked)
        c.asked = millis > 0 && Number.isFinite(millis) ? millis : 0
      }
      return "failure"
    }
  }
  return c
}

/**
 * Runs `onTransition`, if given, for every transition published on `hub`, in a fiber of the current scope;
 * its failures are logged, never the breaker's. Subscribes before returning, so no transition is missed.
 */
export const forkOnTransition = (
  hub: PubSub.PubSub<Transition>,
  onTransition: ((transition: Transition) => Effect.Effect<void>) | undefined
): Effect.Effect<void, never, Scope.Scope> =>
  onTransition === undefined ?
    Effect.void :
    Effect.flatMap(PubSub.subscribe(hub), (subscription) =>
      Queue.take(subscription).pipe(
        Effect.flatMap((t) =>
          Effect.catchAllCause(
            Effect.suspend(() => onTransition(t)),
            (cause) => Effect.logWarning("circuit breaker: onTransition failed", cause)
          )
        ),
        Effect.forever,
        Effect.interruptible,
        Effect.forkScoped,
        Effect.asVoid
      ))

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

export const build = (config: Config, e: Env): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.map(buildInternal(config, e), (b) => b.breaker)

/**
 * Builds a breaker in the current scope: the decisions are `core/breaker.ts` (the state machine) and
 * `core/breakerWindow.ts` (the trip policy's counters); this shell reads the clock, steps the `openFor`
 * schedule, runs the timer that half-opens, and reports metrics, spans and transitions.
 *
 * The machine is held in a local variable, replaced synchronously: a decision (refresh, take a permit)
 * happens inside one synchronous step, so no other fiber can interleave, and the closed path costs no
 * effect of its own (a `Ref` would add one per call).
 */
export const buildInternal = (config: Config, { clock, runtime }: Env): Effect.Effect<Built, never, Scope.Scope> =>
  Effect.gen(function*() {
    const changesHub = yield* PubSub.unbounded<Transition>()
    const { isFailure, labels, openForAtLeast, permits, schedule, slowMillis } = config
    const window = Window.make(config.trip)
    // whether a closed call's outcome needs the time: time windows and slow-call rules
    const timedClosed = Window.timed(window) || slowMillis !== undefined
    const gauge = stateGauge

    let m = Machine.initial
    let scheduleState: unknown = schedule?.initial
    let replay = 0 // schedule steps owed after restoring `openings` from a snapshot
    let lastDelay = config.openForMillis
    // what the failure just classified asked for (openForAtLeast), read when that failure opens the breaker
    let timer: Fiber.RuntimeFiber<void> | undefined
    let disposed = false

    const now = () => clock.unsafeCurrentTimeMillis()

    // the handlers shared by the calls admitted in the current closed generation, built on first use
    let closedHandlers: ClosedHandlers | undefined

    const reports = config.gauge !== "off"
    /** Writes the state to the gauge; a disposed breaker (a dropped key) no longer reports. */
    const publish = () => {
      if (reports && !disposed) gauge.unsafeUpdate(Machine.gaugeValue(m.state), labels)
    }

    /** Takes the machine's next value; a new generation is a transition (or a new period of the same state). */
    const set = (next: Machine.Machine, at: number) => {
      const from = m.state
      const moved = next.generation !== m.generation
      m = next
      if (!moved) return
      closedHandlers = undefined
      publish()
      const to = next.state
      if (from !== to) {
        transitions.unsafeUpdate(1, [...labels, MetricLabel.make("from", from), MetricLabel.make("to", to)])
        changesHub.unsafeOffer({ from, to, at })
      }
    }

    const cancelTimer = () => {
      if (timer !== undefined) {
        timer.unsafeInterruptAsFork(FiberId.none)
        timer = undefined
      }
    }

    /**
     * Brings the machine to `at`: an open breaker whose time is up half-opens; a half-open period whose
     * trials have not all ended by its deadline opens again, as of that deadline.
     */
    const refresh = (at: number) => {
      set(Machine.refresh(m, at), at)
      const deadline = Machine.expiredAt(m, at)
      if (deadline === undefined) return
      open(deadline, 0)
      set(Machine.refresh(m, at), at)
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
    const step = (at: number, openings: number): void => {
      const r = stepSync(runtime, schedule!, at, openings, scheduleState)
      if (r._tag === "Delay") {
        scheduleState = r.state
        lastDelay = r.millis
      }
    }

    /**
     * Opens for openFor's next delay, or for `asked` (the failure that opened it asked for that) when longer;
     * the half-open period after it waits `halfOpenTimeout` for its trials, by default that openFor delay.
     */
    const open = (at: number, asked: number) => {
      if (schedule !== undefined) {
        const openings = m.openings + 1
        for (; replay > 0; replay--) step(at, openings)
        step(at, openings)
      }
      Window.reset(window)
      const delay = Math.max(lastDelay, asked)
      set(Machine.open(m, at, delay, config.halfOpenTimeoutMillis ?? lastDelay), at)
      arm(Math.max(0, m.openUntil - now()))
    }

    const close = (at: number, next: Machine.Machine) => {
      cancelTimer()
      replay = 0
      scheduleState = schedule?.initial
      Window.reset(window)
      set(next, at)
    }

    const classifier = makeClassifier(isFailure, openForAtLeast)
    const { classify } = classifier

    /**
     * Records a call admitted while closed in generation `gen`; true when it changed the state. A call
     * admitted in an earlier period (before an opening, or a reset) that finishes later says nothing about
     * now, even if the breaker has closed again since.
     */
    const recordClosed = (gen: number, outcome: Machine.Outcome, startedAt: number): boolean => {
      if (!Machine.closedCounts(m, gen, outcome)) return false
      const at = timedClosed ? now() : 0
      const slow = slowMillis !== undefined && at - startedAt > slowMillis
      if (!Window.record(window, outcome === "failure", slow, at)) return false
      open(timedClosed ? at : now(), outcome === "failure" ? classifier.asked : 0)
      return true
    }

    /** Records a half-open trial; true when it changed the state (a trial past its deadline never does). */
    const recordTrial = (gen: number, outcome: Machine.Outcome, startedAt: number): boolean => {
      const at = now()
      refresh(at)
      const slow = slowMillis !== undefined && at - startedAt > slowMillis
      const end = Machine.trialEnded(m, gen, outcome, slow, permits)
      m = end.machine
      if (end.verdict === "none") return false
      if (end.verdict === "open") open(at, outcome === "failure" ? classifier.asked : 0)
      else close(at, Machine.close(m))
      return true
    }

    const annotateTransition = annotate("circuit_breaker.transition", () => m.state)
    const annotateRejection = annotate("circuit_breaker.rejected", () => m.state)

    /**
     * Runs `self` and feeds its outcome to `record`, annotating the span when that changed the state.
     * The handlers are arrows in argument position on purpose: loaders that keep function names (tsx,
     * esbuild's keepNames) wrap every *named* closure in a costly `__name` call.
     */
    const observe = <A, E, R>(
      self: Effect.Effect<A, E, R>,
      record: (outcome: Machine.Outcome) => boolean
    ): Effect.Effect<A, E, R> =>
      Effect.matchCauseEffect(
        self,
        handlers(
          (a: A) => record("success") ? Effect.zipRight(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
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
          recordClosed(gen, "success", 0) ? Effect.zipRight(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
        (cause: Cause.Cause<unknown>) =>
          recordClosed(gen, classify(cause), 0)
            ? Effect.zipRight(annotateTransition, Effect.failCause(cause))
            : Effect.failCause(cause)
      )

    const runClosed = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
      if (slowMillis === undefined) {
        const h = closedHandlers ??= makeClosedHandlers(m.generation)
        return Effect.matchCauseEffect(self, h) as Effect.Effect<A, E, R>
      }
      const startedAt = now()
      const gen = m.generation
      return observe(self, (outcome) => recordClosed(gen, outcome, startedAt))
    }

    const reject = (retryAfterMillis: number): Effect.Effect<never, CircuitOpen> => {
      rejections.unsafeUpdate(1, labels)
      return Effect.zipRight(annotateRejection, Effect.fail(circuitOpen(retryAfterOf(retryAfterMillis))))
    }

    // Not closed: decide and take a permit in one synchronous step, uninterruptibly, so an interrupted
    // trial always reaches `recordTrial` and gives its permit back.
    const guarded = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend((): Effect.Effect<A, E | CircuitOpen, R> => {
          const at = now()
          refresh(at)
          const first = m.admitted === 0
          const { admission, machine } = Machine.admit(m, at, permits)
          set(machine, at)
          switch (admission._tag) {
            case "Closed":
              return restore(runClosed(self))
            case "Rejected":
              return reject(admission.retryAfterMillis)
            case "Trial": {
              const gen = admission.generation
              // the period's first trial starts its clock: at the deadline, trials still running reopen it
              if (first) arm(m.halfOpenUntil - at)
              return observe(restore(self), (outcome) => recordTrial(gen, outcome, at))
            }
          }
        })
      )

    const protect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | CircuitOpen, R> =>
      Effect.suspend(() => m.state === "closed" ? runClosed(self) : guarded(self))

    const snapshot = (): Snapshot => {
      refresh(now())
      return { ...Machine.save(m), window: Window.snapshot(window) }
    }

    // restore, then publish the starting state to the gauge
    const initial = config.initialState
    if (initial !== undefined) {
      Window.restore(window, (initial as { readonly window?: unknown }).window)
      m = Machine.restore(initial, config.halfOpenTimeoutMillis ?? delayAt(runtime, config, initial.openings, now()))
      replay = initial.openings
      if (m.state === "open" && !m.isolated) arm(Math.max(0, m.openUntil - now()))
    }
    publish()

    // subscribed before the breaker is returned, so no transition can be missed
    yield* forkOnTransition(changesHub, config.onTransition)

    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        // a keyed breaker's series outlives it (Effect's registry keeps every label set): leave it closed
        if (config.gauge === "release" && !disposed) gauge.unsafeUpdate(Machine.gaugeValue("closed"), labels)
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
        return m.state
      }),
      changes: Stream.fromPubSub(changesHub),
      subscribe: PubSub.subscribe(changesHub),
      isolate: Effect.sync(() => {
        cancelTimer()
        const next = Machine.isolate(m)
        if (next.generation !== m.generation) Window.reset(window)
        set(next, now())
      }),
      // a new closed period even when already closed: calls admitted before the reset no longer count
      reset: Effect.sync(() => {
        cancelTimer()
        close(now(), Machine.reset(m))
      }),
      snapshot: Effect.sync(snapshot)
    }
    return { breaker, publish }
  })
