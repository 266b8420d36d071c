// The HTTP module (userspace/http/http.h): loaded from beside the test
// binary, a real server and client talk over loopback; and a module another
// user could have written is refused.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "userspace/http/http.h"

using namespace gsymprof;

namespace {

std::string build_dir() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  return std::filesystem::path(std::string(exe, static_cast<size_t>(n))).parent_path().string();
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char name[] = "/tmp/gsymprof-http-test.XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("HTTP module: a route's groups, query, headers and body, answered whole or streamed") {
  auto module = http::module();
  REQUIRE_MESSAGE(module, (module ? "" : module.error().message));
  http::ServerLimits limits;
  limits.threads = 2;
  limits.max_body_bytes = 1024;
  std::unique_ptr<http::Server> server = (*module)->make_server(limits);
  server->post(R"(/echo/([a-z]+))", [](const http::Request& request, http::Response& response,
                                       const http::BodyReader& read) {
    std::string body;
    const bool whole = read([&](const char* data, size_t length) {
      body.append(data, length);
      return true;
    });
    response.status = whole ? 201 : 500;
    response.headers.emplace_back("X-Group", request.matches.at(1));
    response.set_content(request.header("x-token") + "|" + body + "|" + std::to_string(request.matches.size()),
                         "text/plain");
  });
  server->post("/stream", [](const http::Request&, http::Response& response, const http::BodyReader&) {
    response.content_type = "application/octet-stream";
    response.stream_size = 3000;
    response.stream = [](size_t offset, size_t length, const http::ChunkSink& write) {
      const std::string piece(std::min<size_t>(length, 1000), static_cast<char>('a' + offset / 1000));
      return write(piece.data(), piece.size());
    };
  });
  const int port = server->bind("127.0.0.1", 0);
  REQUIRE(port > 0);
  server->start();

  http::ClientOptions client;
  client.endpoint = "127.0.0.1:" + std::to_string(port);
  client.tls = false;
  client.timeout = std::chrono::seconds(5);
  http::PostRequest post;
  post.path = "/echo/abc";
  post.headers = {{"X-Token", "t0k"}};
  post.content_type = "text/plain";
  post.body = "hello";
  http::PostResult echoed = (*module)->post(client, post);
  REQUIRE_MESSAGE(echoed.answered, echoed.error);
  CHECK(echoed.status == 201);
  CHECK(echoed.body == "t0k|hello|2");

  SUBCASE("a body over the server's limit stops the reader: the route decides the answer") {
    const std::string over(2000, 'x');
    post.body = over;
    http::PostResult refused = (*module)->post(client, post);
    REQUIRE(refused.answered);
    CHECK(refused.status == 500);
  }
  SUBCASE("a streamed answer arrives whole; one over the client's limit is cut off") {
    post.path = "/stream";
    http::PostResult streamed = (*module)->post(client, post);
    REQUIRE(streamed.answered);
    CHECK(streamed.body == std::string(1000, 'a') + std::string(1000, 'b') + std::string(1000, 'c'));
    post.max_response_bytes = 1500;
    http::PostResult cut = (*module)->post(client, post);
    CHECK_FALSE(cut.answered);
    CHECK(cut.body_too_long);
  }
  SUBCASE("no route: 404; nobody listening: an error said for people") {
    post.path = "/nowhere";
    CHECK((*module)->post(client, post).status == 404);
    server->stop();
    http::PostResult down = (*module)->post(client, post);
    CHECK_FALSE(down.answered);
    CHECK(down.error == "cannot connect");
  }
}

TEST_CASE("HTTP module: loaded only where no other user could have written it") {
  const std::string built = build_dir() + "/" + http::kModuleFile;
  TempDir temp;
  const std::filesystem::path dir = temp.path / "lib";
  std::filesystem::create_directory(dir);
  ::chmod(dir.c_str(), 0755);
  const std::filesystem::path copy = dir / http::kModuleFile;
  std::filesystem::copy_file(built, copy);
  ::chmod(copy.c_str(), 0644);

  auto loaded = http::load_module_from(dir.string());
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().message));
  CHECK(std::string((*loaded)->fingerprint) == http::kInterface);

  SUBCASE("a second copy is loaded itself, not answered by the first one's descriptor name") {
    TempDir other;
    const std::filesystem::path other_dir = other.path / "lib";
    std::filesystem::create_directory(other_dir);
    ::chmod(other_dir.c_str(), 0755);
    std::filesystem::copy_file(built, other_dir / http::kModuleFile);
    ::chmod((other_dir / http::kModuleFile).c_str(), 0644);
    auto second = http::load_module_from(other_dir.string());
    REQUIRE_MESSAGE(second, (second ? "" : second.error().message));
    CHECK(*second != *loaded);
  }
  SUBCASE("a module writable by others") {
    ::chmod(copy.c_str(), 0666);
    auto refused = http::load_module_from(dir.string());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == gsym::ErrorCode::Refused);
    CHECK(refused.error().message.find("writable by group or others") != std::string::npos);
  }
  SUBCASE("a directory on the way writable by others (not sticky)") {
    ::chmod(temp.path.c_str(), 0777);
    auto refused = http::load_module_from(dir.string());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == gsym::ErrorCode::Refused);
    CHECK(refused.error().message.find(temp.path.string() + " is writable by group or others") != std::string::npos);
    ::chmod(temp.path.c_str(), 01777);  // sticky, as /tmp: others cannot replace our entries
    CHECK(http::load_module_from(dir.string()));
  }
  SUBCASE("a module that is a symlink") {
    std::filesystem::remove(copy);
    std::filesystem::create_symlink(built, copy);
    auto refused = http::load_module_from(dir.string());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == gsym::ErrorCode::Refused);
  }
  SUBCASE("a module owned by another user") {
    if (::geteuid() != 0) return;  // only root can give it away
    REQUIRE(::chown(copy.c_str(), 65534, 65534) == 0);
    auto refused = http::load_module_from(dir.string());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("owned by uid 65534") != std::string::npos);
  }
  SUBCASE("no module: NotFound, to look further") {
    std::filesystem::remove(copy);
    auto missing = http::load_module_from(dir.string());
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == gsym::ErrorCode::NotFound);
  }
}
