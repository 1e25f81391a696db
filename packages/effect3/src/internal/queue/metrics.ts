import { Effect, Metric, MetricLabel } from "effect"

/** @internal */
export const dlqDepth = Metric.gauge("effect_resilience_queue_dlq_depth", {
  description: "messages in a dead-letter queue"
})
/** @internal */
export const processed = Metric.counter("effect_resilience_queue_processed_total", {
  description: "messages a consumer handled and acknowledged",
  incremental: true
})
/** @internal */
export const deadLettered = Metric.counter("effect_resilience_queue_dead_lettered_total", {
  description: "messages moved to the dead-letter queue, by reason",
  incremental: true
})
/** @internal */
export const released = Metric.counter("effect_resilience_queue_released_total", {
  description: "messages a consumer released for redelivery after a failure",
  incremental: true
})

/** Label arrays are built once per queue: the metric hook cache is keyed by array identity. */
export const labels = (queue: string) => {
  const base = [MetricLabel.make("queue", queue)]
  return {
    base,
    fatal: [...base, MetricLabel.make("reason", "fatal")],
    maxReceives: [...base, MetricLabel.make("reason", "max-receives")],
    /** dead-lettered by the source on receive: the stored body is not JSON */
    corrupt: [...base, MetricLabel.make("reason", "corrupt-body")]
  }
}

/** Sets the depth gauge of `queue` from a depth just observed. */
export const observeDepth = (queue: ReadonlyArray<MetricLabel.MetricLabel>) => (depth: number) =>
  Effect.sync(() => {
    dlqDepth.unsafeUpdate(depth, queue)
    return depth
  })
