/**
 * The entry's decisions on their own: what a command line asks for, how the process names its
 * own commands, and which start-up failures get one plain line (the e2e suites run the
 * bundle and the binary; these cover the cases a test process cannot stage, such as a
 * folder root may always write).
 */
import { describe, expect, test } from "bun:test";
import { parseLaunch, type Launch } from "../../src/launch/arguments";
import { invocationOf } from "../../src/launch/invocation";
import { programHelp } from "../../src/launch/help";
import { plainFailure } from "../../src/launch/startup-failure";
import { ConfigError } from "../../src/config";
import { StoreLockedError } from "../../src/store/process-lock";

describe("parseLaunch", () => {
  const cases: Array<[string[], Launch]> = [
    [[], { command: "serve" }],
    [["serve"], { command: "serve" }],
    [["migrate"], { command: "migrate" }],
    [["healthcheck"], { command: "healthcheck" }],
    [["cli", "app", "create", "--name", "x"], { command: "cli", args: ["app", "create", "--name", "x"] }],
    [["cli"], { command: "cli", args: [] }],
    [["--help"], { command: "help" }],
    [["-h"], { command: "help" }],
    [["help"], { command: "help" }],
    [["serve", "--help"], { command: "help" }],
    [["migrate", "-h"], { command: "help" }],
    [["--version"], { command: "version" }],
    [["-v"], { command: "version" }],
    [["bogus"], { command: "unknown", argument: "bogus" }],
    [["--port", "9000"], { command: "unknown", argument: "--port" }],
    [["serve", "--port", "9000"], { command: "unknown", argument: "--port" }],
    [["migrate", "--help", "now"], { command: "unknown", argument: "now" }],
  ];
  test.each(cases)("%j", (argv, expected) => {
    expect(parseLaunch(argv)).toEqual(expected);
  });
});

describe("invocationOf", () => {
  test("the binary: its path as typed, quoted when the shell would split it", () => {
    expect(invocationOf({ standalone: true, argv0: "./dist/metered-proxy", userAgent: undefined })).toEqual({
      program: "./dist/metered-proxy",
      cli: "./dist/metered-proxy cli",
    });
    expect(invocationOf({ standalone: true, argv0: "metered-proxy", userAgent: "npm/11.0.0" }).cli).toBe("metered-proxy cli");
    expect(invocationOf({ standalone: true, argv0: "/opt/my proxy/it's", userAgent: undefined }).cli).toBe(`'/opt/my proxy/it'\\''s' cli`);
  });

  test("a checkout: npm's commands, or Bun's when Bun ran the script", () => {
    const npm = { program: "npm start --", cli: "npm run cli --" };
    expect(invocationOf({ standalone: false, argv0: "bun", userAgent: "npm/11.19.1 node/v20.20.2 linux x64 workspaces/false" })).toEqual(npm);
    expect(invocationOf({ standalone: false, argv0: "bun", userAgent: undefined })).toEqual(npm);
    expect(invocationOf({ standalone: false, argv0: "bun", userAgent: "bun/1.4.5 npm/? node/v24.3.0 linux x64" })).toEqual({
      program: "bun start",
      cli: "bun run cli",
    });
  });
});

describe("programHelp", () => {
  // A binary started by a long path once printed "…/metered-proxy [serve]run the service".
  test.each(["./metered-proxy", "/tmp/a/rather/long/folder/for/the/release/dist/metered-proxy"])(
    "every command stands apart from its meaning when the program is %s",
    (program) => {
      const rows = programHelp({ program, cli: `${program} cli` })
        .split("\n")
        .filter((line) => line.startsWith(`  ${program}`));
      expect(rows).toHaveLength(6);
      const meaningColumns = rows.map((line) => {
        const [command = "", meaning = "", ...rest] = line.slice(2).split(/ {2,}/);
        expect({ command: command.startsWith(program), meaning: Boolean(meaning), rest }).toEqual({ command: true, meaning: true, rest: [] });
        return line.lastIndexOf(meaning);
      });
      expect(new Set(meaningColumns).size).toBe(1);
    },
  );
});

describe("plainFailure", () => {
  const address = { host: "0.0.0.0", port: 8787 };
  const listenError = (code: string) => Object.assign(new Error("Failed to start server"), { code, syscall: "listen" });

  test("listen errors name the address and the setting that fixes them", () => {
    expect(plainFailure(listenError("EADDRINUSE"), address)?.line).toBe(
      "port 8787 is in use on 0.0.0.0 (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.",
    );
    expect(plainFailure(listenError("EACCES"), address)?.line).toContain("Set PORT to 1024 or above.");
    expect(plainFailure(listenError("EADDRNOTAVAIL"), { host: "10.9.9.9", port: 8787 })?.line).toContain("HOST 10.9.9.9 is not an address of this machine");
    expect(plainFailure(listenError("EADDRINUSE"), address)?.exitCode).toBe(1);
  });

  test("a folder or file the user may not write names the path and DATABASE_URL", () => {
    const refused = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/data'"), { code: "EACCES", syscall: "mkdir", path: "/srv/data" });
    const plain = plainFailure(refused, address);
    expect(plain?.exitCode).toBe(1);
    expect(plain?.line).toStartWith("cannot write /srv/data (EACCES): the store's files go there (DATABASE_URL;");
  });

  test("configuration errors are exit 2 on one line; the lock keeps exit 3", () => {
    const config = plainFailure(new ConfigError(["PORT: Expected integer", "LOG_LEVEL: Expected union value"]));
    expect(config).toEqual({
      line:
        "invalid configuration: PORT: Expected integer; LOG_LEVEL: Expected union value. Fix the environment variables named and start again " +
        '(the README\'s "Configuration" lists every setting).',
      exitCode: 2,
    });
    expect(plainFailure(new StoreLockedError("/d/p.sqlite.lock", "/d/p.sqlite"))?.exitCode).toBe(3);
  });

  test("anything else is a bug: no plain line, so its stack is kept", () => {
    expect(plainFailure(new TypeError("x is undefined"), address)).toBeNull();
    expect(plainFailure(Object.assign(new Error("no such file"), { code: "ENOENT", path: "/x" }), address)).toBeNull();
    expect(plainFailure("a string", address)).toBeNull();
  });
});
