/**
 * Where the idempotency middleware remembers keys: an atomic claim before the handler runs, the stored
 * response after it, and expiry. Pick an implementation by providing a layer: `layerMemory` (one process),
 * or, when several processes share the keys, the layers of the backend entry points
 * `effect-resilience/IdempotencyStore/Sql` and `effect-resilience/IdempotencyStore/Redis`.
 *
 * Every implementation keeps the same contract, so the middleware (and its tests) do not care which runs:
 *
 * - `claim` is atomic: of many concurrent claims of one fresh `(scope, key)`, exactly one gets `Claimed`.
 * - A record remembers the request's fingerprint; a claim with another fingerprint gets `Mismatch`.
 * - A claim that is in progress answers `InProgress`, unless its lease has run out (its owner died): then the
 *   next claim takes it over with a new token, and the old owner's `complete`/`renew` are refused.
 * - `complete` stores the response and keeps it until the TTL passes; `release` forgets the claim so a
 *   retry runs the handler again.
 *
 * @since 0.1.0
 */
import type { Cause, Duration, Effect, Layer } from "effect"
import type { Fields } from "./internal/errorFields.js"
import * as memory from "./internal/idempotencyStore/memory.js"
import * as internal from "./internal/idempotencyStore/service.js"

/**
 * The parts of a response that are replayed: status, body bytes and the headers of the middleware's
 * allow-list (lower-case names; never `set-cookie`).
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ClaimRequest {
  /**
   * Who is asking: keys of different scopes never collide. The middleware passes a fixed-size digest of the
   * client's scope, never the scope itself (which may be a credential).
   */
  readonly scope: string
  readonly key: string
  /** A hash of what the request asks for (method, path, body). */
  readonly fingerprint: string
  /** How long a completed record is kept. */
  readonly ttl: Duration.Duration
  /** How long an in-progress claim is honoured without a renewal before another request may take it over. */
  readonly lease: Duration.Duration
}

/**
 * The outcome of a claim.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimResult =
  | { readonly _tag: "Claimed"; readonly token: string }
  | { readonly _tag: "InProgress" }
  | { readonly _tag: "Completed"; readonly response: StoredResponse }
  | { readonly _tag: "Mismatch" }

/**
 * Identifies a claim held by one request: `token` is its fencing token.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimRef {
  readonly scope: string
  readonly key: string
  readonly token: string
}

/**
 * The store failed (unreachable, timed out, corrupt record). The middleware fails closed on it: 503, and the
 * handler does not run.
 *
 * `new IdempotencyStoreError({ … })` takes `Fields<IdempotencyStoreError>`: the fields that the interface
 * {@link IdempotencyStoreError} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const IdempotencyStoreError: new(args: Fields<IdempotencyStoreError>) => IdempotencyStoreError =
  internal.IdempotencyStoreError

/**
 * @since 0.1.0
 * @category errors
 */
export interface IdempotencyStoreError extends Cause.YieldableError {
  readonly _tag: "IdempotencyStoreError"
  /** The store operation that failed. */
  readonly operation: "claim" | "complete" | "renew" | "release"
  /** The backend's error behind it. */
  readonly cause: unknown
}

/**
 * A bounded store (the memory store's `maxRecords`) is full of live records: a new key cannot be claimed
 * until some expire. Keys it already holds are still answered. The middleware answers 503 with Retry-After.
 *
 * `new IdempotencyStoreFull({ … })` takes `Fields<IdempotencyStoreFull>`: the fields that the interface
 * {@link IdempotencyStoreFull} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const IdempotencyStoreFull: new(args: Fields<IdempotencyStoreFull>) => IdempotencyStoreFull =
  internal.IdempotencyStoreFull

/**
 * @since 0.1.0
 * @category errors
 */
export interface IdempotencyStoreFull extends Cause.YieldableError {
  readonly _tag: "IdempotencyStoreFull"
  /** The bound on live records that was reached: the store's, or the scope's when `perScope` is set. */
  readonly maxRecords: number
  /** Set when the claim's scope holds its `maxRecordsPerScope` (the store itself has room for others). */
  readonly perScope?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Store {
  readonly claim: (request: ClaimRequest) => Effect.Effect<ClaimResult, IdempotencyStoreError | IdempotencyStoreFull>
  /** Stores the response; `false` when `ref` no longer owns the claim (it was taken over or expired). */
  readonly complete: (
    ref: ClaimRef,
    response: StoredResponse,
    ttl: Duration.Duration
  ) => Effect.Effect<boolean, IdempotencyStoreError>
  /** Extends the lease of a claim in progress; `false` when `ref` no longer owns it. */
  readonly renew: (ref: ClaimRef, lease: Duration.Duration) => Effect.Effect<boolean, IdempotencyStoreError>
  /** Forgets a claim in progress (only if `ref` still owns it) so the next request runs again. */
  readonly release: (ref: ClaimRef) => Effect.Effect<void, IdempotencyStoreError>
}

/**
 * The service tag.
 *
 * @since 0.1.0
 * @category tags
 */
export const IdempotencyStore: typeof internal.IdempotencyStore = internal.IdempotencyStore

/**
 * @since 0.1.0
 * @category tags
 */
export type IdempotencyStore = internal.IdempotencyStore

/**
 * Options of the memory store.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryOptions {
  /**
   * Records kept at most (in progress or completed, until they expire); default 10,000. When every one is
   * live, a claim of a new key fails with {@link IdempotencyStoreFull} (the middleware answers 503): a live
   * claim or a stored response is never dropped to make room, since either would let a handler run twice.
   * Memory is bounded by `maxRecords` × the middleware's `maxResponseBytes` (plus ~200 bytes a record).
   */
  readonly maxRecords?: number
  /**
   * Live records of one client scope at most; default a tenth of `maxRecords` (1,000 of the default
   * 10,000; unbounded when `maxRecords` is). A new key of a scope that holds this many fails with
   * {@link IdempotencyStoreFull} (`perScope: true`, the middleware answers 503) while other scopes keep
   * claiming: one client cannot take the room of all the others. Set it to `maxRecords` when all traffic
   * is one scope (a single caller, or clients behind a proxy the scope does not see through).
   */
  readonly maxRecordsPerScope?: number
}

/**
 * The memory store: a {@link Store} that also tells how many records it holds.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryStore extends Store {
  /** Records held, live or expired but not yet removed. */
  readonly size: Effect.Effect<number>
}

/**
 * An in-memory store for one process, bounded by `maxRecords` and `maxRecordsPerScope` (see {@link MemoryOptions};
 * default options when omitted). Expired records are removed a few at a time on each call, in expiry order from a binary heap:
 * O(log n) per call, never a sweep of every key (and all expired ones before a full store refuses a key). Throws
 * `IllegalArgumentException` for invalid options, when called.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: (options?: MemoryOptions) => Effect.Effect<MemoryStore> = memory.makeMemory

/**
 * The memory store with the default options, built once per layer build: provide it where the server is
 * built, once (`IdempotencyMiddleware.make` takes the store when it runs).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore> = memory.layerMemory

/**
 * The memory store with options. Throws `IllegalArgumentException` for invalid options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryWith: (options: MemoryOptions) => Layer.Layer<IdempotencyStore> = memory.layerMemoryWith
