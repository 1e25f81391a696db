/**
 * The idempotency store's tag and errors, defined here and re-exported by `IdempotencyStore.ts`: the
 * stores (`idempotencyStore/{memory,sql,redis}.ts`) and the middleware reach them without importing a
 * public module.
 */
import { Context, Data } from "effect"
import type { Store } from "../IdempotencyStore.js"

export class IdempotencyStoreError extends Data.TaggedError("IdempotencyStoreError")<{
  readonly operation: "claim" | "complete" | "renew" | "release"
  readonly cause: unknown
}> {
  override get message(): string {
    return `idempotency store ${this.operation} failed: ${String(this.cause)}`
  }
}

export class IdempotencyStoreFull extends Data.TaggedError("IdempotencyStoreFull")<{ readonly maxRecords: number }> {
  override get message(): string {
    return `idempotency store full: ${this.maxRecords} live records`
  }
}

export class IdempotencyStore extends Context.Tag("effect-resilience/IdempotencyStore")<IdempotencyStore, Store>() {}
