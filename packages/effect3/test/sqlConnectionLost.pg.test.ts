/**
 * How the SQL idempotency store recognises a lost connection, to try a statement again on another one (the shared
 * suite contract/IdempotencyStore.terminate.sql.int.test.ts terminates real backends): Effect 3's only, as its
 * PostgreSQL client (`@effect/sql-pg` on `pg`) reports failures as a `SqlError` with `pg`'s error as its cause.
 */
import { SqlError } from "@effect/sql/SqlError"
import { expect, it } from "@effect/vitest"
import { connectionLost } from "../src/internal/idempotencyStore/sql.js"

it("only a lost connection is retried, not a statement's own error", () => {
  const lost = (cause: unknown) => connectionLost(new SqlError({ cause, message: "x" }))
  expect(lost(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })))
    .toBe(true)
  expect(lost(new Error("Connection terminated unexpectedly"))).toBe(true)
  expect(lost(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true)
  expect(lost(Object.assign(new Error("connection failure"), { code: "08006" }))).toBe(true)
  expect(lost(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false)
  expect(lost(Object.assign(new Error("canceling statement due to lock timeout"), { code: "55P03" }))).toBe(false)
  expect(lost(new Error("Cannot use a pool after calling end on the pool"))).toBe(false)
  expect(connectionLost(new Error("Connection terminated unexpectedly"))).toBe(false)
})
