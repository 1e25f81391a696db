import * as core from "@effect-resilience/core/adaptiveLimit"
import * as shed from "@effect-resilience/core/criticality"
import type { Duration, Scope } from "effect"
import { Cause, Context, Data, Effect, Exit, Layer, Option, Random } from "effect"
import type { AdaptiveLimiter, Options } from "../AdaptiveLimiter.js"
import type * as Api from "../AdaptiveLimiter.js"
import { CurrentCriticality } from "./criticality.js"
import type { Fields } from "./errorFields.js"
import * as Meter from "./metrics.js"
import { gaugeWith } from "./metrics.js"
import * as slots from "./slots.js"
import { adaptiveLimiterQueueWait, histogramWith } from "./telemetry.js"
import * as validate from "./validate.js"

/**
 * The partition (client, tenant) of the call the fiber makes, set by `LoadShedMiddleware`'s `partitionBy`:
 * the limiter's waiters are served round robin between partitions (see `slots.ts`). `undefined`: one shared.
 */
export const CurrentPartition: Context.Reference<string | undefined> = Context.Reference<string | undefined>(
  "effect-resilience/AdaptiveLimiter/currentPartition",
  { defaultValue: () => undefined }
)

export class LimitExceeded extends Data.TaggedError("LimitExceeded")<Fields<Api.LimitExceeded>> {
  override get message(): string {
    const which = this.limiter === undefined ? "adaptive limiter" : `adaptive limiter "${this.limiter}"`
    switch (this.reason) {
      case "queue-full":
        return `${which} is full: ${this.limit} running and ${this.maxQueue} waiting`
      case "queue-timeout":
        return `${which}: waited too long for one of its ${this.limit} slots`
      case "closed":
        return `${which} is closed`
      case "shed":
        return `${which}: the rest of its ${this.limit} slots is kept for more critical calls`
    }
  }
}

export const limitGauge = Meter.gauge("effect_resilience_adaptive_limiter_limit", {
  description: "the concurrency limit an adaptive limiter has found"
})
export const inflightGauge = Meter.gauge("effect_resilience_adaptive_limiter_inflight", {
  description: "calls holding an adaptive limiter slot"
})
export const queuedGauge = Meter.gauge("effect_resilience_adaptive_limiter_queued", {
  description: "calls waiting for an adaptive limiter slot"
})
export const dropsTotal = Meter.counter("effect_resilience_adaptive_limiter_drops_total", {
  description: "calls an adaptive limiter refused, by reason",
  incremental: true
})

// Effect 4's `Effect.timeout` fails with `TimeoutError` (Effect 3's was `TimeoutException`)
const timeoutTags = new Set(["AttemptTimeout", "DeadlineExceeded", "TimeoutError"])

/** The default drop: the call timed out (ours, Effect's or the deadline's). */
export const isTimeout = (cause: Cause.Cause<unknown>): boolean => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isNone(failure)) return false
  const error = failure.value
  return typeof error === "object" && error !== null && timeoutTags.has((error as { _tag?: unknown })._tag as string)
}

export const aimd = (
  options?: { readonly backoffRatio?: number; readonly timeout?: Duration.Input }
): core.Aimd => {
  const backoffRatio = options?.backoffRatio ?? core.defaults.aimd.backoffRatio
  if (!(backoffRatio > 0 && backoffRatio < 1)) {
    validate.invalid(`AdaptiveLimiter.aimd backoffRatio must be in (0, 1), got ${backoffRatio}`)
  }
  const timeoutMillis = options?.timeout === undefined
    ? core.defaults.aimd.timeoutMillis
    : validate.millis("AdaptiveLimiter.aimd timeout", options.timeout)
  if (!(timeoutMillis > 0)) validate.invalid("AdaptiveLimiter.aimd timeout must be longer than zero")
  return { _tag: "Aimd", backoffRatio, timeoutMillis }
}

const unitInterval = (name: string, n: number) => {
  if (!(n > 0 && n <= 1)) validate.invalid(`${name} must be in (0, 1], got ${n}`)
  return n
}

type VegasOptions = {
  readonly smoothing?: number
  readonly probeMultiplier?: number
  readonly alpha?: number
  readonly beta?: number
}

const vegasFields = (name: string, options: VegasOptions | undefined) => {
  const d = core.defaults.vegas
  const alpha = options?.alpha ?? d.alpha
  const beta = options?.beta ?? d.beta
  if (!(alpha > 0 && beta > alpha && Number.isFinite(beta))) {
    validate.invalid(`AdaptiveLimiter.${name} needs 0 < alpha < beta (finite), got alpha ${alpha}, beta ${beta}`)
  }
  return {
    smoothing: unitInterval(`AdaptiveLimiter.${name} smoothing`, options?.smoothing ?? d.smoothing),
    probeMultiplier: validate.positiveInt(
      `AdaptiveLimiter.${name} probeMultiplier`,
      options?.probeMultiplier ?? d.probeMultiplier
    ),
    alpha,
    beta
  }
}

export const vegas = (options?: VegasOptions): core.Vegas => ({ _tag: "Vegas", ...vegasFields("vegas", options) })

export const windowedVegas = (options?: VegasOptions): core.WindowedVegas => ({
  _tag: "WindowedVegas",
  ...vegasFields("windowedVegas", options),
  window: core.defaults.windowedVegas.window
})

export const windowed = (
  algorithm: core.Algorithm,
  options?: {
    readonly minWindowTime?: Duration.Input
    readonly maxWindowTime?: Duration.Input
    readonly windowSize?: number
    readonly minRttThreshold?: Duration.Input
    readonly sample?:
      | "average"
      | { readonly percentile: number; readonly capacity?: number }
      | { readonly trimmedMean: number }
  }
): core.Windowed => {
  if (algorithm._tag === "Windowed") {
    return validate.invalid("AdaptiveLimiter.windowed cannot wrap another windowed algorithm")
  }
  const d = core.defaults.windowed
  const windowTime = (name: "minWindowTime" | "maxWindowTime", fallback: number) => {
    const input = options?.[name]
    const ms = input === undefined
      ? fallback
      : validate.millis(`AdaptiveLimiter.windowed ${name}`, input, { finite: true })
    if (!(ms >= 100)) validate.invalid(`AdaptiveLimiter.windowed ${name} must be at least 100 ms, got ${ms} ms`)
    return ms
  }
  const minWindowMillis = windowTime("minWindowTime", d.minWindowMillis)
  const maxWindowMillis = windowTime("maxWindowTime", d.maxWindowMillis)
  if (minWindowMillis > maxWindowMillis) {
    validate.invalid(
      `AdaptiveLimiter.windowed needs minWindowTime <= maxWindowTime, got ${minWindowMillis} and ${maxWindowMillis} ms`
    )
  }
  const windowSize = options?.windowSize ?? d.windowSize
  if (!(Number.isInteger(windowSize) && windowSize >= 10)) {
    validate.invalid(`AdaptiveLimiter.windowed windowSize must be an integer >= 10, got ${windowSize}`)
  }
  const minRttMillis = options?.minRttThreshold === undefined
    ? d.minRttMillis
    : validate.millis("AdaptiveLimiter.windowed minRttThreshold", options.minRttThreshold, { finite: true })
  const sample = options?.sample
  let kind: core.WindowSample = d.sample
  if (sample !== undefined && sample !== "average") {
    if ("percentile" in sample) {
      const { capacity = Math.max(1_000, windowSize), percentile } = sample
      if (!(percentile > 0 && percentile < 1)) {
        validate.invalid(`AdaptiveLimiter.windowed percentile must be in (0, 1), got ${percentile}`)
      }
      if (!(Number.isInteger(capacity) && capacity >= windowSize)) {
        validate.invalid(`AdaptiveLimiter.windowed capacity must be an integer >= windowSize, got ${capacity}`)
      }
      kind = { _tag: "Percentile", percentile, capacity }
    } else {
      const trim = sample.trimmedMean
      if (!(trim >= 0 && trim < 0.5)) {
        validate.invalid(`AdaptiveLimiter.windowed trimmedMean must be in [0, 0.5), got ${trim}`)
      }
      kind = { _tag: "TrimmedMean", trim }
    }
  }
  return { _tag: "Windowed", algorithm, minWindowMillis, maxWindowMillis, windowSize, minRttMillis, sample: kind }
}

export const gradient2 = (options?: {
  readonly smoothing?: number
  readonly rttTolerance?: number
  readonly longWindow?: number
  readonly queueSize?: number
}): core.Gradient2 => {
  const d = core.defaults.gradient2
  const rttTolerance = options?.rttTolerance ?? d.rttTolerance
  if (!(rttTolerance >= 1 && Number.isFinite(rttTolerance))) {
    validate.invalid(`AdaptiveLimiter.gradient2 rttTolerance must be a finite number >= 1, got ${rttTolerance}`)
  }
  const queueSize = options?.queueSize ?? d.queueSize
  if (!(Number.isInteger(queueSize) && queueSize >= 0)) {
    validate.invalid(`AdaptiveLimiter.gradient2 queueSize must be an integer >= 0, got ${queueSize}`)
  }
  return {
    _tag: "Gradient2",
    smoothing: unitInterval("AdaptiveLimiter.gradient2 smoothing", options?.smoothing ?? d.smoothing),
    rttTolerance,
    longWindow: validate.positiveInt("AdaptiveLimiter.gradient2 longWindow", options?.longWindow ?? d.longWindow),
    queueSize
  }
}

const resolve = (options: Options) => {
  const minLimit = validate.positiveInt("AdaptiveLimiter minLimit", options.minLimit ?? 1)
  const maxLimit = validate.positiveInt("AdaptiveLimiter maxLimit", options.maxLimit ?? 1_000)
  const initialLimit = validate.positiveInt(
    "AdaptiveLimiter initialLimit",
    options.initialLimit ?? Math.max(minLimit, Math.min(20, maxLimit))
  )
  if (!(minLimit <= initialLimit && initialLimit <= maxLimit)) {
    validate.invalid(
      `AdaptiveLimiter needs minLimit <= initialLimit <= maxLimit, got ${minLimit}, ${initialLimit}, ${maxLimit}`
    )
  }
  const maxQueue = options.maxQueue ?? 0
  if (!(Number.isInteger(maxQueue) && maxQueue >= 0)) {
    validate.invalid(`AdaptiveLimiter maxQueue must be an integer >= 0, got ${maxQueue}`)
  }
  const queueTimeout = options.queueTimeout === undefined
    ? undefined
    : validate.millis("AdaptiveLimiter queueTimeout", options.queueTimeout)
  const config: core.Config = {
    bounds: { minLimit, maxLimit, initialLimit },
    algorithm: options.algorithm ?? core.defaults.gradient2
  }
  const shares = options.shares === undefined ? undefined : {
    default: unitInterval("AdaptiveLimiter shares.default", options.shares.default ?? shed.defaultShares.default),
    sheddable: unitInterval(
      "AdaptiveLimiter shares.sheddable",
      options.shares.sheddable ?? shed.defaultShares.sheddable
    )
  }
  return { config, maxQueue, queueTimeout, name: options.name, isOverload: options.isOverload ?? isTimeout, shares }
}

export const make = (options: Options): Effect.Effect<AdaptiveLimiter, never, Scope.Scope> => {
  const resolved = resolve(options)
  return Effect.flatMap(Random.next, (seed) =>
    Effect.flatMap(Effect.context<never>(), (context) => {
      const built = build(resolved, seed, context)
      return Effect.as(Effect.addFinalizer(() => Effect.sync(built.close)), built.limiter)
    }))
}

export const layer = <I>(tag: Context.Key<I, AdaptiveLimiter>, options: Options): Layer.Layer<I> => {
  resolve(options)
  return Layer.effect(tag, make(options))
}

const build = (
  { config, isOverload, maxQueue, name, queueTimeout, shares }: ReturnType<typeof resolve>,
  seed: number,
  // Effect 4 keeps metrics in the context's `MetricRegistry`: every update of one limiter goes to the registry of the
  // context it was built in, so its gauges' deltas always add up in one place (as a bulkhead's)
  context: Context.Context<never>
) => {
  const attributes: Record<string, string> = name === undefined ? {} : { limiter: name }
  const limitOfGauge = gaugeWith(limitGauge, attributes)
  const inflight = gaugeWith(inflightGauge, attributes)
  const queued = gaugeWith(queuedGauge, attributes)
  const drops = slots.reasonCounters(dropsTotal, attributes)
  const waited = histogramWith(adaptiveLimiterQueueWait, attributes)
  let state = core.initial(config, seed)
  let limit = core.limitOf(config, state)
  // gauges move by deltas, so limiters sharing a label set (or none) add up instead of overwriting each other
  limitOfGauge.modifyUnsafe(limit, context)
  const needsRandom = core.usesRandom(config.algorithm)

  const slotted = slots.make<LimitExceeded>({
    capacity: () => limit,
    maxQueue,
    queueTimeout,
    reject: (reason) => {
      drops[reason].updateUnsafe(1, context)
      return new LimitExceeded({ reason, limiter: name, limit, maxQueue })
    },
    onActive: (delta) => inflight.modifyUnsafe(delta, context),
    onQueued: (delta) => queued.modifyUnsafe(delta, context),
    onWaited: (millis) => waited.updateUnsafe(millis / 1000, context),
    span: "adaptive_limiter",
    module: "AdaptiveLimiter",
    labels: attributes
  })

  const record = (
    rttMillis: number,
    inflight: number,
    dropped: boolean,
    started: number,
    startMillis: number,
    random: number
  ) => {
    state = core.update(config, state, { rttMillis, inflight, dropped, limit: started, startMillis }, random)
    const next = core.limitOf(config, state)
    if (next !== limit) {
      limitOfGauge.modifyUnsafe(next - limit, context)
      limit = next
    }
  }

  /** Times `self` inside its slot and feeds the outcome to the algorithm: successes and overloads; other failures and
   * interruptions say nothing about the dependency's capacity and are ignored. */
  const measured = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.clockWith((clock) => {
      // nanoseconds: a fast call must not measure as zero; monotonic: a step of the wall clock is no round trip
      const start = clock.monotonicTimeNanosUnsafe()
      const inflight = slotted.active()
      const started = limit
      return Effect.onExit(self, (exit) => {
        const dropped = Exit.isFailure(exit) && isOverload(exit.cause)
        if (Exit.isFailure(exit) && !dropped) return Effect.void
        const rtt = Number(clock.monotonicTimeNanosUnsafe() - start) / 1e6
        const startMillis = Number(start) / 1e6
        return needsRandom
          ? Effect.map(Random.next, (r) => record(rtt, inflight, dropped, started, startMillis, r))
          : Effect.sync(() => record(rtt, inflight, dropped, started, startMillis, 0))
      })
    })

  const limiter: AdaptiveLimiter = {
    protect: shares === undefined
      ? (self) => Effect.flatMap(CurrentPartition, (partition) => slotted.protect(measured(self), undefined, partition))
      : (self) =>
        Effect.flatMap(
          Effect.zip(CurrentCriticality, CurrentPartition),
          ([level, partition]) =>
            slotted.protect(
              measured(self),
              level === "critical" ? undefined : shed.threshold(limit, level, shares),
              partition
            )
        ),
    limit: Effect.sync(() => limit),
    stats: Effect.sync(() => ({ limit, inflight: slotted.active(), queued: slotted.queued() }))
  }
  const close = () => {
    slotted.close()
    limitOfGauge.modifyUnsafe(-limit, context)
  }
  return { limiter, close }
}
