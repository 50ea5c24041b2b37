import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.temporal.internal.testservice.GRPCServerHelper;
import io.temporal.internal.testservice.TestServicesStarter;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * Temporal's time-skipping test server (io.temporal.testserver.TestServer) bound to 127.0.0.1:
 * TestServer's own main listens on every interface, an unauthenticated frontend on the network.
 * Same arguments: the port, then optionally --enable-time-skipping.
 */
public final class LoopbackTestServer {
  public static void main(String[] args) throws Exception {
    if (args.length < 1 || args.length > 2 || (args.length == 2 && !args[1].equalsIgnoreCase("--enable-time-skipping"))) {
      System.err.println("Usage: LoopbackTestServer <port> [--enable-time-skipping]");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    boolean lockTimeSkipping = args.length < 2;
    TestServicesStarter services = new TestServicesStarter(lockTimeSkipping, 0L);
    NettyServerBuilder builder = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
    GRPCServerHelper.registerServicesAndHealthChecks(services.getServices(), builder);
    Server server = builder.build().start();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      server.shutdown();
      services.close();
    }));
    server.awaitTermination();
  }
}
