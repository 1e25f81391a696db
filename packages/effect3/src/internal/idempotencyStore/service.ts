/**
 * The idempotency store's tag and errors, defined here and re-exported by `IdempotencyStore.ts`: the
 * stores (`{memory,sql,redis}.ts` beside it) and the middleware reach them without importing a
 * public module.
 */
import { Context, Data } from "effect"
import type { Store } from "../../IdempotencyStore.js"
import type * as Api from "../../IdempotencyStore.js"
import type { Fields } from "../errorFields.js"

/** `String(u)`, which throws for an object without a prototype (a row of node:sqlite, a clone): a message never does. */
const text = (u: unknown): string => {
  try {
    return String(u)
  } catch {
    return Object.prototype.toString.call(u)
  }
}

export class IdempotencyStoreError
  extends Data.TaggedError("IdempotencyStoreError")<Fields<Api.IdempotencyStoreError>>
{
  override get message(): string {
    return `idempotency store ${this.operation} failed: ${text(this.cause)}`
  }
}

export class IdempotencyStoreFull extends Data.TaggedError("IdempotencyStoreFull")<Fields<Api.IdempotencyStoreFull>> {
  override get message(): string {
    return this.perScope === true
      ? `idempotency store full for one scope: ${this.maxRecords} live records (maxRecordsPerScope)`
      : `idempotency store full: ${this.maxRecords} live records`
  }
}

export class IdempotencyStore extends Context.Tag("effect-resilience/IdempotencyStore")<IdempotencyStore, Store>() {}
