import * as visibilityRules from "@effect-resilience/core/visibility"
import { Duration } from "effect"
import type { Options } from "../../../Consumer.js"
import type { Message } from "../../../QueueSource.js"
import * as retry from "../../retry.js"
import * as validate from "../../validate.js"
import { labels } from "../metrics.js"

/** A consumer's options, validated once and with every default filled in. */
export interface Config<A, E, R, R2> {
  readonly options: Options<A, E, R, R2>
  readonly concurrency: number
  readonly maxReceiveCount: number
  readonly batchSize: number
  /**
   * The poller claims once at least this many slots are free: half the buffer (at most a batch), so that
   * a claim fetches a batch instead of one message per slot freed, while the buffered half keeps every worker
   * busy; 1 with `orderedByKey`, where one partition may run dry while the others are full.
   */
  readonly claimAtLeast: number
  readonly pollInterval: Duration.Duration
  /** The handler's time limit per delivery (ms), retries included. */
  readonly timeLimit: number
  /** How long closing waits for running handlers before interrupting them (ms). */
  readonly shutdownGrace: number
  readonly withRetry: ReturnType<typeof retry.compile<R2>> | undefined
  readonly partitions: number
  /** At most this many messages are held (buffered or being handled) at once. */
  readonly capacity: number
  /** The source's visibility timeout (ms). */
  readonly visibility: number
  readonly tags: ReturnType<typeof labels>
  readonly redeliveryDelayOf: (message: Message<A>) => Duration.Input
}

export const compile = <A, E, R, R2>(options: Options<A, E, R, R2>): Config<A, E, R, R2> => {
  const concurrency = validate.positiveInt("Consumer.run concurrency", options.concurrency ?? 1)
  const maxReceiveCount = validate.positiveInt("Consumer.run maxReceiveCount", options.maxReceiveCount)
  const bufferSize = options.bufferSize === undefined
    ? concurrency
    : validate.positiveInt("Consumer.run bufferSize", options.bufferSize)
  const batchSize = options.batchSize === undefined
    ? Math.min(bufferSize + concurrency, 32)
    : validate.positiveInt("Consumer.run batchSize", options.batchSize)
  const pollInterval = Duration.millis(
    validate.millis("Consumer.run pollInterval", options.pollInterval ?? "100 millis", { finite: true })
  )
  const { source } = options
  const visibility = Duration.toMillis(source.visibilityTimeout)
  const timeLimit = options.timeout === undefined
    ? visibilityRules.defaultTimeLimit(visibility)
    : validate.millis("Consumer.run timeout", options.timeout, { finite: true })
  const problem = visibilityRules.timeLimitProblem(timeLimit, visibility, source.extend !== undefined)
  if (problem !== undefined) validate.invalid(`Consumer.run on source "${source.name}": ${problem}`)
  const shutdownGrace = options.shutdownGrace === undefined
    ? visibilityRules.defaultShutdownGrace(timeLimit)
    : validate.millis("Consumer.run shutdownGrace", options.shutdownGrace, { finite: true })
  const redeliveryDelay = options.redeliveryDelay
  if (redeliveryDelay !== undefined && typeof redeliveryDelay !== "function") {
    validate.millis("Consumer.run redeliveryDelay", redeliveryDelay)
  }
  return {
    options,
    concurrency,
    maxReceiveCount,
    batchSize,
    claimAtLeast: options.orderedByKey === true ? 1 : Math.max(1, Math.min(batchSize, Math.floor(bufferSize / 2))),
    pollInterval,
    timeLimit,
    shutdownGrace,
    withRetry: options.retry === undefined ? undefined : retry.compile(options.retry),
    partitions: options.orderedByKey === true ? concurrency : 1,
    capacity: bufferSize + concurrency,
    visibility,
    tags: labels(source.name),
    redeliveryDelayOf: (message) =>
      redeliveryDelay === undefined
        ? 0
        : typeof redeliveryDelay === "function"
        ? redeliveryDelay(message)
        : redeliveryDelay
  }
}
