/**
 * The idempotency store's decisions, as plain functions of a record and the caller's clock.
 *
 * A record is in progress (claimed, its handler running) until it holds a response. It is alive while
 * `now < expiresAt`; an in-progress record is honoured while `now < leaseUntil`, after which its owner is
 * presumed dead and the next claim takes it over. Times are epoch milliseconds of the caller's clock.
 *
 * The memory store runs these functions; the SQL statement and the Redis script restate them in their own
 * language (one round trip each), so the three stores answer alike: keep them in step.
 */

/** What a claim needs to know about the record stored for its `(scope, key)`. */
export interface RecordView {
  readonly fingerprint: string
  readonly completed: boolean
  readonly leaseUntil: number
  readonly expiresAt: number
}

/**
 * The answer to a claim:
 * - `New`: no live record (none, or expired): claim it (a bounded store checks its capacity first).
 * - `Reclaim`: in progress, but its lease has run out: take it over with a new fencing token.
 * - `InProgress`: in progress with a live lease: the caller must wait or give up.
 * - `Replay`: completed: answer with the stored response.
 * - `Mismatch`: a live record of another request (another fingerprint) under the same key.
 */
export type ClaimDecision = "New" | "Reclaim" | "InProgress" | "Replay" | "Mismatch"

export const isAlive = (record: RecordView, now: number): boolean => record.expiresAt > now

export const decideClaim = (record: RecordView | undefined, fingerprint: string, now: number): ClaimDecision => {
  if (record === undefined || !isAlive(record, now)) return "New"
  if (record.fingerprint !== fingerprint) return "Mismatch"
  if (record.completed) return "Replay"
  return record.leaseUntil > now ? "InProgress" : "Reclaim"
}

/** The times of a record just claimed (by `New` or `Reclaim`). */
export interface Claimed {
  readonly leaseUntil: number
  readonly expiresAt: number
}

export const claimed = (now: number, leaseMillis: number, ttlMillis: number): Claimed => ({
  leaseUntil: now + leaseMillis,
  expiresAt: now + ttlMillis
})

/**
 * Whether the holder of `token` may complete, renew or release the record: it still owns the claim (no
 * one took it over), the record is in progress, and it has not expired. A lapsed lease alone does not
 * end ownership: until someone reclaims the record its owner may still finish.
 */
export const owns = (
  record: RecordView & { readonly token: string },
  token: string,
  now: number
): boolean => record.token === token && !record.completed && isAlive(record, now)

/** A completed record keeps its response for the TTL from completion; its lease no longer matters. */
export const completedAt = (now: number, ttlMillis: number): Claimed => ({ leaseUntil: 0, expiresAt: now + ttlMillis })

/** A renewal moves the lease; the expiry stays. */
export const renewedLease = (now: number, leaseMillis: number): number => now + leaseMillis

/** The instant after which a record is dead whatever it holds: a store may forget it then. */
export const endOf = (record: Pick<RecordView, "leaseUntil" | "expiresAt">): number =>
  Math.max(record.expiresAt, record.leaseUntil)

/**
 * Room for a new record in a bounded store: `Store` when the whole store holds `maxRecords` live records,
 * `Scope` when the claim's scope holds its `maxRecordsPerScope`, else `Room`. The store's bound is
 * checked first: a full store refuses everyone alike.
 */
export type RoomDecision = "Room" | "Store" | "Scope"

export const room = (
  records: number,
  maxRecords: number,
  scopeRecords: number,
  maxRecordsPerScope: number
): RoomDecision => records >= maxRecords ? "Store" : scopeRecords >= maxRecordsPerScope ? "Scope" : "Room"

/**
 * The default cap of one scope: a tenth of the store (1,000 of the default 10,000), so that one client
 * filling its share leaves nine tenths to the others; unbounded when the store is.
 */
export const defaultMaxRecordsPerScope = (maxRecords: number): number =>
  maxRecords === Infinity ? Infinity : Math.max(1, Math.ceil(maxRecords / 10))

/**
 * The request target a fingerprint covers: the target as the client sent it on its request line, never the
 * scheme, the host or the `Host` header. An origin-form target (`/orders?x=1`) is taken as it is, character for
 * character: `/orders?` and `/orders#frag` are not `/orders`, so a key reused with them gets 422, not the other
 * request's answer. An absolute-form target (`http://host:port/orders?x=1`, which a request through a proxy
 * carries, and the form a web `Request`'s URL has) loses its scheme and authority and keeps the rest as it is
 * (`/` for an empty path, as its origin form has): a retry through another hostname, port spelling or proxy is
 * the same request. Any other form (`*`, `host:port`) is taken as it is.
 *
 * Nothing is parsed or normalised (no `new URL`): a normalisation would make different targets one (`/orders?`
 * and `/orders`), and a target rebuilt from the `Host` header would make one target several, whatever `Host` a
 * retry sends. The Effect 3 and Effect 4 editions hand this the same string for the same request line.
 */
export const requestTarget = (target: string): string => {
  if (target.startsWith("/")) return target
  const origin = absoluteOrigin.exec(target)
  if (origin === null) return target
  const rest = target.slice(origin[0].length)
  return rest.startsWith("/") ? rest : `/${rest}`
}

/** The scheme and authority of an absolute-form target (RFC 3986 §3.1, §3.2): up to the first `/`, `?` or `#`. */
const absoluteOrigin = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/

const utf8 = new TextEncoder()
const byteOrderMark = new Uint8Array([0xef, 0xbb, 0xbf])

/**
 * The bytes of a request body that only survives as the text a UTF-8 decoder made of it (something before the
 * middleware read it as text, and the platform kept the text, not the bytes): the text's UTF-8 encoding when that
 * is exactly the bytes sent, else `undefined`. A decoder turns every byte sequence that is not UTF-8 into U+FFFD,
 * so a text with one stands for many bodies (`ff01` and `fe01` are both "\uFFFD\u0001"; a body that holds
 * U+FFFD itself cannot be told from them either), while a text without one was valid UTF-8 and encodes back to its
 * bytes. A decoder that drops a leading byte order mark (a web `Request`'s `text()`; Node's stream decoder keeps
 * it) leaves one question: the declared `Content-Length` answers it, and without one there is no answer.
 */
export const bodyOfText = (
  text: string,
  bomDropped: boolean,
  declaredLength: string | undefined
): Uint8Array | undefined => {
  if (text.includes("\uFFFD")) return undefined
  const bytes = utf8.encode(text)
  if (!bomDropped) return bytes
  const length = declaredLength === undefined || declaredLength.trim() === "" ? NaN : Number(declaredLength)
  if (length === bytes.byteLength) return bytes
  if (length !== bytes.byteLength + byteOrderMark.byteLength) return undefined
  const withMark = new Uint8Array(length)
  withMark.set(byteOrderMark)
  withMark.set(bytes, byteOrderMark.byteLength)
  return withMark
}
