import type { Scope } from "effect"
import { Context, Data, Effect, Layer } from "effect"
import type { Bulkhead, Options, RejectionReason } from "../Bulkhead.js"
import type * as Api from "../Bulkhead.js"
import type { Fields } from "./errorFields.js"
import * as Meter from "./metrics.js"
import { gaugeWith } from "./metrics.js"
import * as slots from "./slots.js"
import { bulkheadQueueWait, histogramWith } from "./telemetry.js"
import * as validate from "./validate.js"

export class BulkheadFull extends Data.TaggedError("BulkheadFull")<Fields<Api.BulkheadFull>> {
  override get message(): string {
    const which = this.bulkhead === undefined ? "bulkhead" : `bulkhead "${this.bulkhead}"`
    switch (this.reason) {
      case "queue-full":
        return `${which} is full: ${this.maxConcurrent} running and ${this.maxQueue} waiting`
      case "queue-timeout":
        return `${which}: waited too long for one of its ${this.maxConcurrent} slots`
      case "closed":
        return `${which} is closed`
    }
  }
}

// Gauges move by deltas (`modifyUnsafe`), so bulkheads sharing a label set add up instead of
// overwriting each other.
export const activeGauge = Meter.gauge("effect_resilience_bulkhead_active", {
  description: "calls holding a bulkhead slot"
})
export const queuedGauge = Meter.gauge("effect_resilience_bulkhead_queued", {
  description: "calls waiting for a bulkhead slot"
})
export const rejections = Meter.counter("effect_resilience_bulkhead_rejections_total", {
  description: "calls turned away by a bulkhead, by reason",
  incremental: true
})

/**
 * Builds the bulkhead: fixed-capacity slots (see `slots.ts`: strictly first-in-first-out, one mask and one match
 * frame on the uncontended path), closed with the scope.
 */
export const make = (options: Options): Effect.Effect<Bulkhead, never, Scope.Scope> => {
  const maxConcurrent = validate.positiveInt("Bulkhead maxConcurrent", options.maxConcurrent)
  if (!(Number.isInteger(options.maxQueue) && options.maxQueue >= 0)) {
    validate.invalid(`Bulkhead maxQueue must be an integer >= 0, got ${options.maxQueue}`)
  }
  const maxQueue = options.maxQueue
  const queueTimeout = options.queueTimeout === undefined
    ? undefined
    : validate.millis("Bulkhead queueTimeout", options.queueTimeout)
  const name = options.name
  return Effect.flatMap(Effect.context<never>(), (context) => {
    const state = build(maxConcurrent, maxQueue, queueTimeout, name, context)
    return Effect.as(Effect.addFinalizer(() => Effect.sync(state.close)), state.bulkhead)
  })
}

const build = (
  maxConcurrent: number,
  maxQueue: number,
  queueTimeout: number | undefined,
  name: string | undefined,
  // Effect 4 keeps metrics in the context's `MetricRegistry`: every update of one bulkhead goes to the registry of
  // the context it was built in, so its gauges' deltas always add up in one place
  context: Context.Context<never>
) => {
  const attributes: Record<string, string> = name === undefined ? {} : { bulkhead: name }
  const active = gaugeWith(activeGauge, attributes)
  const queued = gaugeWith(queuedGauge, attributes)
  const rejected = slots.reasonCounters(rejections, attributes)
  const waited = histogramWith(bulkheadQueueWait, attributes)
  const slotted = slots.make<BulkheadFull>({
    capacity: () => maxConcurrent,
    maxQueue,
    queueTimeout,
    reject: (reason) => {
      rejected[reason].updateUnsafe(1, context)
      // a bulkhead passes no share, so it never sheds
      return new BulkheadFull({ reason: reason as RejectionReason, bulkhead: name, maxConcurrent, maxQueue })
    },
    onActive: (delta) => active.modifyUnsafe(delta, context),
    onQueued: (delta) => queued.modifyUnsafe(delta, context),
    onWaited: (millis) => waited.updateUnsafe(millis / 1000, context),
    span: "bulkhead",
    module: "Bulkhead",
    labels: attributes
  })
  const bulkhead: Bulkhead = {
    maxConcurrent,
    maxQueue,
    protect: (self) => slotted.protect(self),
    stats: Effect.sync(() => ({ active: slotted.active(), queued: slotted.queued() }))
  }
  return { bulkhead, close: slotted.close }
}

export const layer = <I>(tag: Context.Key<I, Bulkhead>, options: Options): Layer.Layer<I> =>
  Layer.effect(tag, make(options))
