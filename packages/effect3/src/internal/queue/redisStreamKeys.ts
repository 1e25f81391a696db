import { hashTagOf } from "../redis/options.js"
import * as validate from "../validate.js"

/**
 * The keys of one queue: the stream, its dead-letter stream, the DLQ's index by message id, the release errors,
 * and how each pending entry's delivery stands (core/streamQueueScripts.ts).
 */
export interface StreamKeys {
  readonly stream: string
  readonly dlq: string
  readonly index: string
  readonly errors: string
  readonly deliveries: string
}

/**
 * The keys of the queue on `stream`. The scripts touch several of them in one call, so on a Redis Cluster
 * they must share the stream's slot. On one node they are `<stream>:dlq`, `<stream>:dlq:ids`,
 * `<stream>:errors` and `<stream>:deliveries`, as they always were; so they are on a Cluster when the stream has a hash tag
 * (`{orders}` → `{orders}:dlq`: one slot). A stream without one is hashed whole, which is exactly what the
 * tag `{<stream>}` hashes: on a Cluster its keys are `{<stream>}:dlq`, … — one slot by construction. A name
 * with no tag but a `}` cannot be put in a tag (a tag ends at the first `}`): rejected on a Cluster.
 */
export const streamKeys = (stream: string, cluster: boolean): StreamKeys => {
  if (typeof stream !== "string" || stream.length === 0) {
    validate.invalid(`RedisStreamQueue stream must be a non-empty string, got ${JSON.stringify(stream)}`)
  }
  let base = stream
  if (cluster && hashTagOf(stream) === undefined) {
    if (stream.includes("}")) {
      validate.invalid(
        `RedisStreamQueue stream ${JSON.stringify(stream)} has no hash tag and contains "}", so on a Redis ` +
          `Cluster its derived keys cannot share its slot: put a hash tag in the name, e.g. "{orders}"`
      )
    }
    base = `{${stream}}`
  }
  return {
    stream,
    dlq: `${base}:dlq`,
    index: `${base}:dlq:ids`,
    errors: `${base}:errors`,
    deliveries: `${base}:deliveries`
  }
}
