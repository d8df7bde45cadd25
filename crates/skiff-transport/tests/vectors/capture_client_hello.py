import socket, sys, time
port=int(sys.argv[1]); out=sys.argv[2]
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1); s.bind(("127.0.0.1",port)); s.listen(1)
c,_=s.accept(); c.settimeout(1.0); data=b""
try:
    while True:
        d=c.recv(65536)
        if not d: break
        data+=d
        if len(data)>=5 and len(data)>=5+int.from_bytes(data[3:5],'big'): break
except Exception: pass
open(out,"wb").write(data); c.close()
