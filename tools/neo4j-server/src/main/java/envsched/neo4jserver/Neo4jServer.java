package envsched.neo4jserver;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Stream;
import org.neo4j.commandline.admin.security.SetInitialPasswordCommand;
import org.neo4j.cli.ExecutionContext;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.ConnectorPortRegister;
import org.neo4j.configuration.connectors.ConnectorType;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.internal.helpers.HostnamePort;
import org.neo4j.io.ByteUnit;
import org.neo4j.io.fs.DefaultFileSystemAbstraction;
import org.neo4j.kernel.internal.GraphDatabaseAPI;
import picocli.CommandLine;

/**
 * A real Neo4j server (Community, the version of the pom) in this JVM, for the store tests and
 * for users without Docker.
 *
 * <p>Bolt listens on 127.0.0.1, on a free port the server binds itself (so that no other process
 * can take it between its choice and the bind) or on {@code --port}, unencrypted, with
 * authentication: user {@code
 * neo4j}, password from the environment variable {@code NEO4J_PASSWORD} (at least 8
 * characters), set before the server first starts the way {@code neo4j-admin dbms
 * set-initial-password} sets it, so that no connection ever meets the default password. When the
 * server is ready, its Bolt URI is the one line printed on standard output; SIGTERM (or SIGINT)
 * stops it cleanly and the process exits 0, and so does the end of the process that started it
 * (a test run or script killed with SIGKILL leaves no server behind).
 *
 * <p>Usage: {@code NEO4J_PASSWORD=... java -jar neo4j-server.jar [--home DIR] [--port PORT]
 * [--page-cache SIZE]}. {@code --home} keeps databases and logs ({@code logs/debug.log}) in DIR,
 * so that a restart reopens them (the password is that of the first start); without it a new
 * temporary folder is used and deleted on exit. {@code --port} is Bolt's port (default 0: a free
 * one); a restart on the port of a server that was killed reaches the clients that knew it, and a
 * port another process holds ends the server with exit code 3 and an {@code error:} line. {@code
 * --page-cache} is Neo4j's page cache (default 512m); the heap is the JVM's ({@code java
 * -Xmx...}).
 */
public final class Neo4jServer {
    private static final String USER = "neo4j";
    private static final int MIN_PASSWORD = 8;
    private static final int PORT_IN_USE = 3;
    private static final String USAGE =
            "usage: NEO4J_PASSWORD=... java -jar neo4j-server.jar [--home DIR] [--port PORT] "
                    + "[--page-cache SIZE]";

    private Neo4jServer() {}

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (IllegalArgumentException error) {
            System.err.println("error: " + error.getMessage());
            System.exit(2);
        }
    }

    private static int run(String[] args) {
        Path home = null;
        String pageCache = "512m";
        int port = 0;
        for (int i = 0; i < args.length; i++) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--home" -> home = Path.of(required(args[i], value));
                case "--page-cache" -> pageCache = required(args[i], value);
                case "--port" -> port = port(required(args[i], value));
                default -> throw new IllegalArgumentException(
                        "unknown argument " + args[i] + "; " + USAGE);
            }
            i++;
        }
        String password = System.getenv("NEO4J_PASSWORD");
        if (password == null || password.length() < MIN_PASSWORD) {
            throw new IllegalArgumentException(
                    "set NEO4J_PASSWORD to the password of user neo4j (at least "
                            + MIN_PASSWORD + " characters)");
        }
        String user = System.getenv("NEO4J_USER");
        if (user != null && !user.equals(USER)) {
            throw new IllegalArgumentException(
                    "NEO4J_USER=" + user + ": this server has only user " + USER);
        }
        long pageCacheBytes = ByteUnit.parse(pageCache);
        boolean temporary = home == null;
        try {
            home = temporary ? Files.createTempDirectory("neo4j-server") : home.toAbsolutePath();
            Files.createDirectories(home);
        } catch (IOException error) {
            throw new UncheckedIOException(error);
        }

        CountDownLatch stop = new CountDownLatch(1);
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), signal -> stop.countDown());
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), signal -> stop.countDown());
        // the end of the process that started the server (scripts/with_neo4j.sh) stops it too
        ProcessHandle.current()
                .parent()
                .ifPresent(parent -> parent.onExit().thenRun(stop::countDown));

        if (!Files.exists(home.resolve("data").resolve("databases").resolve("system"))) {
            setInitialPassword(home, password);
        }
        DatabaseManagementService service;
        try {
            service =
                    new DatabaseManagementServiceBuilder(home)
                            .setConfig(GraphDatabaseSettings.auth_enabled, true)
                            .setConfig(GraphDatabaseSettings.pagecache_memory, pageCacheBytes)
                            .setConfig(GraphDatabaseSettings.udc_enabled, false)
                            .setConfig(BoltConnector.enabled, true)
                            .setConfig(
                                    BoltConnector.listen_address,
                                    new SocketAddress("127.0.0.1", port))
                            .setConfig(
                                    BoltConnector.encryption_level,
                                    BoltConnector.EncryptionLevel.DISABLED)
                            .build();
        } catch (RuntimeException error) {
            if (!causedByBind(error)) {
                throw error;
            }
            System.err.println(
                    "error: Bolt cannot listen on 127.0.0.1:" + port
                            + " (another process holds it): " + error.getMessage());
            if (temporary) {
                delete(home);
            }
            return PORT_IN_USE;
        }
        try {
            GraphDatabaseService db = service.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
            HostnamePort bolt =
                    ((GraphDatabaseAPI) db)
                            .getDependencyResolver()
                            .resolveDependency(ConnectorPortRegister.class)
                            .getLocalAddress(ConnectorType.BOLT);
            String version =
                    db.executeTransactionally(
                            "CALL dbms.components() YIELD versions, edition "
                                    + "RETURN versions[0] + ' ' + edition AS version",
                            Map.of(),
                            result -> (String) result.next().get("version"));
            System.err.println(
                    "Neo4j " + version + " ready, home " + home + "; stop with SIGTERM");
            System.out.println("bolt://127.0.0.1:" + bolt.getPort());
            System.out.flush();
            stop.await();
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
        } finally {
            service.shutdown();
            if (temporary) {
                delete(home);
            }
        }
        System.err.println("Neo4j stopped");
        return 0;
    }

    private static int port(String value) {
        try {
            int port = Integer.parseInt(value);
            if (port >= 0 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException error) {
            // reported below
        }
        throw new IllegalArgumentException("--port " + value + ": expected 0-65535");
    }

    private static boolean causedByBind(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof BindException) {
                return true;
            }
        }
        return false;
    }

    private static String required(String flag, String value) {
        if (value == null) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return value;
    }

    /** What {@code neo4j-admin dbms set-initial-password} does: data/dbms/auth.ini in home. */
    private static void setInitialPassword(Path home, String password) {
        // its message goes to stderr: stdout carries the URI alone
        ExecutionContext context =
                new ExecutionContext(
                        home,
                        home.resolve("conf"),
                        System.err,
                        System.err,
                        new DefaultFileSystemAbstraction());
        int code = new CommandLine(new SetInitialPasswordCommand(context)).execute(password);
        if (code != 0) {
            throw new IllegalArgumentException(
                    "setting the initial password failed (exit code " + code + ")");
        }
    }

    private static void delete(Path folder) {
        try (Stream<Path> paths = Files.walk(folder)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        } catch (IOException error) {
            System.err.println("could not delete " + folder + ": " + error.getMessage());
        }
    }
}
