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
import { Context, Data, type Duration, type Effect, Layer } from "effect"
import * as internal from "./internal/idempotencyStore.js"

/**
 * The parts of a response that are replayed: status, body bytes and a few headers (lower-case names;
 * `content-type` and `location` — never `set-cookie`).
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
  /** Who is asking (an API key, an account): keys of different scopes never collide. */
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
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyStoreError extends Data.TaggedError("IdempotencyStoreError")<{
  readonly operation: "claim" | "complete" | "renew" | "release"
  readonly cause: unknown
}> {
  override get message(): string {
    return `idempotency store ${this.operation} failed: ${String(this.cause)}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Store {
  readonly claim: (request: ClaimRequest) => Effect.Effect<ClaimResult, IdempotencyStoreError>
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
export class IdempotencyStore extends Context.Tag("effect-resilience/IdempotencyStore")<IdempotencyStore, Store>() {}

/**
 * An in-memory store for one process. Expired records are removed a few at a time on each call, in
 * expiry order from a binary heap: O(log n) per call, never a sweep of every key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Store & { readonly size: Effect.Effect<number> }> = internal.makeMemory

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore> = Layer.effect(IdempotencyStore, internal.makeMemory)
