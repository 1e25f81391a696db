import { describe, expect, it } from "vitest"
import * as Problem from "../src/problem.js"

describe("core/problem", () => {
  it("a short type is a name under the library's URN; a URI is kept; detail only when given", () => {
    expect(Problem.problemBody({ status: 400, type: "body-unreadable", title: "t", detail: "d" })).toEqual({
      type: "urn:effect-resilience:problem:body-unreadable",
      title: "t",
      status: 400,
      detail: "d"
    })
    expect(Problem.problemBody({ status: 429, type: "https://x.test/p", title: "t", headers: { a: "b" } })).toEqual({
      type: "https://x.test/p",
      title: "t",
      status: 429
    })
  })
})
