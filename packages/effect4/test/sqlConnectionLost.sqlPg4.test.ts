/**
 * How the SQL idempotency store recognises a lost connection, to try a statement again on another one (the shared
 * suite contract/IdempotencyStore.terminate.sql.int.test.ts terminates real backends): Effect 4's only, as its
 * PostgreSQL client (`@effect/sql-pg` 4, no `pg`) reports failures as a `SqlError` with a `reason`.
 */
import { expect, it } from "@effect/vitest"
import { ConnectionError, SqlError, UniqueViolation, UnknownError } from "effect/sql/SqlError"
import { connectionLost } from "../src/internal/idempotencyStore/sql.js"

it("only a lost connection is retried, not a statement's own error", () => {
  const unknown = (cause: unknown) => connectionLost(new SqlError({ reason: new UnknownError({ cause }) }))
  const connection = (cause: unknown, operation?: string) =>
    connectionLost(
      new SqlError({ reason: new ConnectionError(operation === undefined ? { cause } : { cause, operation }) })
    )
  // the server terminated the backend (SQLSTATE 57P01), a connection exception (08xxx), a socket error
  expect(unknown(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })))
    .toBe(true)
  expect(unknown(Object.assign(new Error("connection failure"), { code: "08006" }))).toBe(true)
  expect(unknown(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true)
  // sql-pg 4's own reports of a socket that failed or closed under a statement
  expect(connection(new Error("Connection closed"), "query")).toBe(true)
  expect(connection(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }), "query")).toBe(true)
  // not lost: a statement's own errors, a client closed on purpose, a server that refused the connection
  expect(unknown(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false)
  expect(
    connectionLost(new SqlError({ reason: new UniqueViolation({ cause: new Error("dup"), constraint: "pk" }) }))
  ).toBe(false)
  expect(unknown(Object.assign(new Error("canceling statement due to lock timeout"), { code: "55P03" }))).toBe(false)
  expect(connection(new Error("Connection is closed"), "query")).toBe(false)
  expect(connection(new Error("connect ECONNREFUSED"), "connect")).toBe(false)
  expect(connectionLost(new Error("Connection terminated unexpectedly"))).toBe(false)
})
