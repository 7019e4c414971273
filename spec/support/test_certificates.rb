# frozen_string_literal: true

require "fileutils"
require "open3"
require "openssl"
require "securerandom"
require "tmpdir"

# Throwaway certificates for TLS specs, made with the `openssl` CLI in a private tmpdir: a CA, a
# server certificate for 127.0.0.1 and localhost, a client certificate for mutual TLS, and a second,
# unrelated CA (with its own client certificate) for the "wrong CA" cases. Every certificate is a
# v3 certificate (leaves with basicConstraints CA:FALSE and the right extendedKeyUsage, as
# rustls/webpki want) and every key is PKCS#8 PEM ("BEGIN PRIVATE KEY"), which rustls-pemfile,
# OpenSSL and Ruby all read. Removed at exit.
class TestCertificates
  DAYS = 3
  # Keeps `openssl req` away from the system openssl.cnf and its default extensions.
  REQ_CONFIG = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"

  attr_reader :dir, :key_type

  # One set per process: making keys costs a few hundred milliseconds.
  def self.shared
    @shared ||= new
  end

  def self.made
    @made ||= []
  end

  # key_type: :ec (P-256, fast) or :rsa (2048 bits).
  def initialize(key_type: :ec)
    raise ArgumentError, "key_type must be :ec or :rsa" unless %i[ec rsa].include?(key_type)

    @key_type = key_type
    @dir = Dir.mktmpdir("fair-tenant-certs")
    self.class.made << self
    make_all
  end

  def ca_file = path("ca.crt")
  def ca_key = path("ca.key")
  def server_cert = path("server.crt")
  def server_key = path("server.key")
  def client_cert = path("client.crt")
  def client_key = path("client.key")
  def wrong_ca_file = path("wrong_ca.crt")
  def wrong_ca_key = path("wrong_ca.key")
  # Signed by the wrong CA: a server that trusts only ca.crt must reject it.
  def wrong_client_cert = path("wrong_client.crt")
  def wrong_client_key = path("wrong_client.key")

  # ssl_params for redis-rb 4.8 (`Redis.new(ssl: true, ssl_params: ...)`): verifies the server
  # against ca_file (hostname included) and, with client: true, presents the client certificate
  # (client: :wrong presents the one signed by the wrong CA).
  def ssl_params(ca_file: self.ca_file, client: false)
    params = { ca_file: ca_file, verify_mode: OpenSSL::SSL::VERIFY_PEER }
    cert, key = { true => [client_cert, client_key], wrong: [wrong_client_cert, wrong_client_key] }[client]
    return params unless cert

    params.merge(cert: OpenSSL::X509::Certificate.new(File.read(cert)), key: OpenSSL::PKey.read(File.read(key)))
  end

  def cleanup
    FileUtils.rm_rf(@dir)
  end

  private

  def path(name) = File.join(@dir, name)

  def make_all
    File.write(path("req.cnf"), REQ_CONFIG)
    make_ca("ca", "fair-tenant test CA")
    make_ca("wrong_ca", "fair-tenant unrelated CA")
    make_leaf("server", "localhost", "ca", <<~EXT)
      extendedKeyUsage = serverAuth
      subjectAltName = IP:127.0.0.1,DNS:localhost
    EXT
    make_leaf("client", "fair-tenant client", "ca", "extendedKeyUsage = clientAuth\n")
    make_leaf("wrong_client", "fair-tenant client", "wrong_ca", "extendedKeyUsage = clientAuth\n")
    %w[server.csr client.csr wrong_client.csr].each { |f| File.delete(path(f)) }
  end

  def make_ca(name, common_name)
    make_key(name)
    # `openssl req` (3.0) takes extensions only from its -config file.
    File.write(path("#{name}.cnf"), REQ_CONFIG + <<~EXT)
      [v3]
      basicConstraints = critical, CA:TRUE
      keyUsage = critical, keyCertSign, cRLSign
      subjectKeyIdentifier = hash
    EXT
    openssl("req", "-x509", "-new", "-key", path("#{name}.key"), "-sha256", "-days", DAYS.to_s,
            "-subj", "/CN=#{common_name}", "-config", path("#{name}.cnf"), "-extensions", "v3", "-set_serial", serial,
            "-out", path("#{name}.crt"))
  end

  def make_leaf(name, common_name, issuer, extensions)
    make_key(name)
    usage = key_type == :rsa ? "digitalSignature, keyEncipherment" : "digitalSignature"
    File.write(path("#{name}.ext"), <<~EXT + extensions)
      [v3]
      basicConstraints = critical, CA:FALSE
      keyUsage = critical, #{usage}
      subjectKeyIdentifier = hash
      authorityKeyIdentifier = keyid
    EXT
    openssl("req", "-new", "-key", path("#{name}.key"), "-subj", "/CN=#{common_name}",
            "-config", path("req.cnf"), "-out", path("#{name}.csr"))
    openssl("x509", "-req", "-in", path("#{name}.csr"), "-CA", path("#{issuer}.crt"), "-CAkey", path("#{issuer}.key"),
            "-set_serial", serial, "-days", DAYS.to_s, "-sha256",
            "-extfile", path("#{name}.ext"), "-extensions", "v3", "-out", path("#{name}.crt"))
  end

  # genpkey writes PKCS#8 ("BEGIN PRIVATE KEY") for both key types.
  def make_key(name)
    algorithm = key_type == :rsa ? %w[RSA -pkeyopt rsa_keygen_bits:2048] : %w[EC -pkeyopt ec_paramgen_curve:P-256]
    openssl("genpkey", "-algorithm", *algorithm, "-out", path("#{name}.key"))
  end

  def serial
    "0x#{SecureRandom.hex(16).sub(/\A./, "1")}"
  end

  def openssl(*args)
    output, status = Open3.capture2e("openssl", *args)
    raise "openssl #{args.first} failed (#{status}) in #{@dir}:\n#{output}" unless status.success?
  rescue Errno::ENOENT
    raise "the openssl CLI is not installed (apt-get install openssl)"
  end
end

at_exit { TestCertificates.made.each(&:cleanup) }
