/**
 * What the queue sources and the consumer do with messages, as plain functions (shared by both editions):
 * receipts, bodies stored as JSON, and the partition a message is handled on.
 *
 * A receipt is `<position>:<fencing token>`: the position is a sequence number (the memory source), a
 * PostgreSQL bigint or a Redis stream id; the token is what a fenced statement compares.
 */

/** A receipt's position and token, both as numbers (the memory source's sequence number and generation). */
export const parseReceipt = (receipt: string): readonly [number, number] => {
  const colon = receipt.lastIndexOf(":")
  return [Number(receipt.slice(0, colon)), Number(receipt.slice(colon + 1))]
}

/** Same, keeping the position as text (a PostgreSQL bigint or a Redis stream id). */
export const splitReceipt = (receipt: string): readonly [string, number] => {
  const colon = receipt.lastIndexOf(":")
  return [receipt.slice(0, colon), Number(receipt.slice(colon + 1))]
}

/** `JSON.parse` that returns its error instead of throwing (a body some other writer stored). */
export const tryParse = (
  text: string
): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) }
  }
}

/** The reason a message whose stored body is not JSON is dead-lettered with on receive. */
export const corruptReason = (error: string) => `corrupt body: ${error}`

/**
 * Serializes a body for a durable source; `undefined`, functions and symbols (which JSON drops) and
 * unserializable values (cycles, bigints) are rejected up front, so nothing unreadable is ever stored.
 */
export const serialize = (
  body: unknown
): { readonly ok: true; readonly text: string } | { readonly ok: false; readonly error: unknown } => {
  try {
    const text = JSON.stringify(body) as string | undefined
    return text === undefined
      ? { ok: false, error: new TypeError(`a message body must be JSON-serializable, got ${typeof body}`) }
      : { ok: true, text }
  } catch (error) {
    return { ok: false, error }
  }
}

/**
 * Serializes every body before anything is written, so a body JSON cannot carry fails the whole send:
 * the texts in order, or the first error.
 */
export const serializeAll = (
  messages: ReadonlyArray<{ readonly body: unknown }>
): { readonly ok: true; readonly texts: ReadonlyArray<string> } | { readonly ok: false; readonly error: unknown } => {
  const texts: Array<string> = []
  for (const m of messages) {
    const body = serialize(m.body)
    if (!body.ok) return body
    texts.push(body.text)
  }
  return { ok: true, texts }
}

/**
 * The consumer's partition (worker buffer) of a message: 0 with one partition; else by its key, so that one
 * key is handled by one worker in order, or by its id when it has no key.
 */
export const partitionOf = (partitions: number, id: string, key: string | undefined): number => {
  if (partitions === 1) return 0
  return hash(key ?? id) % partitions
}

/** FNV-1a: spreads keys over partitions. */
const hash = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/**
 * `source` with its grouped ack, `ackMany`, as a property object spread does not copy. A wrapper written
 * `{ ...source, ack: counted }` means to change how messages are acknowledged: were `ackMany` copied, the
 * consumer would acknowledge through the original's and never call the wrapper's `ack`. Without it, the
 * consumer acknowledges each message with the wrapper's `ack`; a wrapper that wants grouped acks names
 * `ackMany` itself.
 */
export const withAckMany = <S extends object, F>(source: S, ackMany: F): S & { readonly ackMany: F } =>
  Object.defineProperty(source, "ackMany", { value: ackMany, enumerable: false }) as S & { readonly ackMany: F }
