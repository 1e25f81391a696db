import type { Context, Scope } from "effect"
import { Data, Effect, Layer, Metric, MetricLabel } from "effect"
import type { Bulkhead, Options, RejectionReason } from "../Bulkhead.js"
import type * as Api from "../Bulkhead.js"
import type { Fields } from "./errorFields.js"
import * as slots from "./slots.js"
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

// Gauges move by deltas (`unsafeModify`), so bulkheads sharing a label set add up instead of
// overwriting each other.
export const activeGauge = Metric.gauge("effect_resilience_bulkhead_active", {
  description: "calls holding a bulkhead slot"
})
export const queuedGauge = Metric.gauge("effect_resilience_bulkhead_queued", {
  description: "calls waiting for a bulkhead slot"
})
export const rejections = Metric.counter("effect_resilience_bulkhead_rejections_total", {
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
  return Effect.suspend(() => {
    const state = build(maxConcurrent, maxQueue, queueTimeout, name)
    return Effect.as(Effect.addFinalizer(() => Effect.sync(state.close)), state.bulkhead)
  })
}

const build = (maxConcurrent: number, maxQueue: number, queueTimeout: number | undefined, name: string | undefined) => {
  // label arrays are built once: the metric hook cache is keyed by array identity
  const tags: ReadonlyArray<MetricLabel.MetricLabel> = name === undefined ? [] : [MetricLabel.make("bulkhead", name)]
  const rejectionTags = slots.reasonLabels(tags)
  const slotted = slots.make<BulkheadFull>({
    capacity: () => maxConcurrent,
    maxQueue,
    queueTimeout,
    reject: (reason) => {
      rejections.unsafeUpdate(1, rejectionTags[reason])
      // a bulkhead passes no share, so it never sheds
      return new BulkheadFull({ reason: reason as RejectionReason, bulkhead: name, maxConcurrent, maxQueue })
    },
    onActive: (delta) => activeGauge.unsafeModify(delta, tags),
    onQueued: (delta) => queuedGauge.unsafeModify(delta, tags),
    span: "bulkhead"
  })
  const bulkhead: Bulkhead = {
    maxConcurrent,
    maxQueue,
    protect: (self) => slotted.protect(self),
    stats: Effect.sync(() => ({ active: slotted.active(), queued: slotted.queued() }))
  }
  return { bulkhead, close: slotted.close }
}

export const layer = <I>(tag: Context.Tag<I, Bulkhead>, options: Options): Layer.Layer<I> =>
  Layer.scoped(tag, make(options))
